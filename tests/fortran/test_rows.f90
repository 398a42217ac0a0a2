! Fortran module: rows that vary per rank (cairn_state_add_rows) and
! cairn_load_options_add_may_be_missing. Particles with counts that differ
! per rank (rank 1 has none) saved on all ranks, loaded on every smaller
! rank count with the even split and with given counts into arrays
! allocated by resize callbacks, ids and positions bitwise in their stored
! order; a key allowed to be missing, and a misspelt one refused.
module rows_buffers
  use, intrinsic :: iso_c_binding
  implicit none
  private
  integer(c_int64_t), allocatable, target, public :: id(:)
  real(c_double), allocatable, target, public :: x(:, :) ! x(3, rows)
  integer(c_int64_t), public :: asked_id = -1, asked_x = -1
  public :: grow_id, grow_x
contains
  function grow_id(rows, user) bind(C) result(p)
    integer(c_int64_t), value :: rows
    type(c_ptr), value :: user
    type(c_ptr) :: p
    p = user ! not used: the buffers are module variables
    asked_id = rows
    if (allocated(id)) deallocate (id)
    allocate (id(rows))
    p = c_null_ptr
    if (rows > 0) p = c_loc(id(1))
  end function grow_id
  function grow_x(rows, user) bind(C) result(p)
    integer(c_int64_t), value :: rows
    type(c_ptr), value :: user
    type(c_ptr) :: p
    p = user ! not used
    asked_x = rows
    if (allocated(x)) deallocate (x)
    allocate (x(3, rows))
    p = c_null_ptr
    if (rows > 0) p = c_loc(x(1, 1))
  end function grow_x
end module rows_buffers

program test_rows
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  use test_support
  use rows_buffers
  implicit none
  type(cairn_state) :: st
  type(cairn_load_options) :: lo
  type(cairn_load_result) :: lr
  integer(c_int64_t), allocatable, target :: sid(:)
  real(c_double), allocatable, target :: sx(:, :)
  integer(c_int64_t) :: rows, total, first, i, want, l, o, g
  integer(c_int64_t), target :: nope
  integer :: ierr, m, comm, me, nranks, mode, r, k
  character(len=:), allocatable :: dir, path
  logical :: ok

  call test_init()
  dir = test_dir()
  path = dir // '/rows'
  rows = saved_rows(test_rank)
  total = saved_offset(test_size)
  allocate (sid(rows), sx(3, rows))
  do i = 1, rows
    sid(i) = (saved_offset(test_rank) + i - 1) * 3 + 1
    do k = 1, 3
      sx(k, i) = pos(saved_offset(test_rank) + i - 1, k)
    end do
  end do

  ! ---- save on all ranks ---------------------------------------------------------
  call cairn_state_create(st)
  if (rows > 0) then
    call cairn_state_add_rows(st, 'particles', 'id', CAIRN_I64, rows, data=c_loc(sid(1)))
    call cairn_state_add_rows(st, 'particles', 'x', CAIRN_F64, rows, [3_c_int64_t], c_loc(sx(1, 1)))
  else
    call cairn_state_add_rows(st, 'particles', 'id', CAIRN_I64, rows)
    call cairn_state_add_rows(st, 'particles', 'x', CAIRN_F64, rows, [3_c_int64_t])
  end if
  call cairn_save(st, path, MPI_COMM_WORLD)
  call cairn_state_rows(st, 'particles', l, o, g)
  call check(l == rows .and. o == saved_offset(test_rank) .and. g == total, 'rows after save')
  call cairn_state_rows(st, 'none', ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "no row group 'none'", 'rows of an unknown group')
  call cairn_state_free(st)

  ! ---- load on M = 1 .. all ranks: even split, then given counts -----------------
  do m = 1, test_size
    call MPI_Comm_split(MPI_COMM_WORLD, merge(0, MPI_UNDEFINED, test_rank < m), test_rank, comm, ierr)
    if (comm == MPI_COMM_NULL) cycle
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, nranks, ierr)
    do mode = 0, 1
      first = 0
      do r = 0, me
        if (mode == 0) then
          want = total / nranks
          if (r < mod(total, int(nranks, c_int64_t))) want = want + 1
        else
          want = 0
          if (r == nranks - 1) want = total
        end if
        if (r < me) first = first + want
      end do
      call cairn_state_create(st)
      call cairn_state_add_rows(st, 'particles', 'id', CAIRN_I64, 0_c_int64_t, resize=grow_id)
      call cairn_state_add_rows(st, 'particles', 'x', CAIRN_F64, 0_c_int64_t, [3_c_int64_t], resize=grow_x)
      if (mode == 1) call cairn_state_rows_split_counts(st, 'particles', want)
      call cairn_load(st, path, comm)
      call cairn_state_rows(st, 'particles', l, o, g)
      ok = asked_id == want .and. asked_x == want .and. l == want .and. o == first .and. g == total
      do i = 1, want
        ok = ok .and. id(i) == (first + i - 1) * 3 + 1
        do k = 1, 3
          ok = ok .and. x(k, i) == pos(first + i - 1, k)
        end do
      end do
      call check(ok, 'rows loaded on ' // itoa(m) // ' ranks, mode ' // itoa(mode))
      call cairn_state_free(st)
    end do
    call MPI_Comm_free(comm, ierr)
  end do

  ! ---- may_be_missing -------------------------------------------------------------
  call cairn_load_options_create(lo)
  call cairn_load_options_add_may_be_missing(lo, 'nope')
  call cairn_state_create(st)
  call cairn_state_add_rows(st, 'particles', 'id', CAIRN_I64, 0_c_int64_t, resize=grow_id)
  call cairn_state_add_rows(st, 'particles', 'x', CAIRN_F64, 0_c_int64_t, [3_c_int64_t], resize=grow_x)
  nope = 7
  call cairn_state_add_scalar(st, 'nope', nope)
  call cairn_load(st, path, MPI_COMM_WORLD, lo, lr, ierr)
  call check_ok(ierr, 'load with a key that may be missing')
  call check(lr%missing == 1 .and. nope == 7, 'the missing key is reported and left alone')
  call cairn_state_free(st)
  call cairn_state_create(st)
  call cairn_state_add_rows(st, 'particles', 'id', CAIRN_I64, 0_c_int64_t, resize=grow_id)
  call cairn_state_add_rows(st, 'particles', 'x', CAIRN_F64, 0_c_int64_t, [3_c_int64_t], resize=grow_x)
  call cairn_state_add_scalar(st, 'nop', nope)
  call cairn_load(st, path, MPI_COMM_WORLD, lo, lr, ierr)
  call check_err(ierr, CAIRN_ERR_NOT_FOUND, "'nop'", 'a misspelt key is refused')
  call cairn_state_free(st)
  call cairn_load_options_free(lo)

  deallocate (sid, sx, path, dir)
  if (allocated(id)) deallocate (id)
  if (allocated(x)) deallocate (x)
  call test_finish('fortran_rows')

contains

  integer(c_int64_t) function saved_rows(r)
    integer, intent(in) :: r
    saved_rows = 0
    if (r /= 1) saved_rows = 2 + 3 * r
  end function saved_rows

  integer(c_int64_t) function saved_offset(r)
    integer, intent(in) :: r
    integer :: j
    saved_offset = 0
    do j = 0, r - 1
      saved_offset = saved_offset + saved_rows(j)
    end do
  end function saved_offset

  real(c_double) function pos(gi, k)
    integer(c_int64_t), intent(in) :: gi
    integer, intent(in) :: k
    pos = real(gi, c_double) * 0.25d0 + real(k, c_double) / 3.0d0
  end function pos
end program test_rows
