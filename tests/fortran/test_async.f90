! Fortran module, mpi_f08: asynchronous save. Round trip (staged, the
! arrays overwritten, committed; the checkpoint holds the old values, loaded
! on another decomposition), the integer-communicator variant, freeing an
! unfinished handle, an unwritable path (an error on every rank), and a
! manager created with a type(MPI_Comm).
program test_async
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
  integer(c_int64_t), parameter :: nx = 13, ny = 7
  type(cairn_state) :: st
  type(cairn_async) :: h, h2
  type(cairn_save_options) :: so
  type(cairn_save_result) :: sr
  type(cairn_metadata) :: md
  type(cairn_manager) :: m
  real(c_double), allocatable, target :: t(:, :)
  integer(c_int64_t), target :: step
  character(len=24), target :: title
  integer(c_int64_t) :: i0, ni, i, j, s
  integer :: ierr, ws
  logical :: flag, found
  character(len=:), allocatable :: a, b, c, bad

  call test_init(thread_multiple=.true.)
  a = test_dir() // '/a'
  b = test_dir() // '/b'
  c = test_dir() // '/c'
  bad = test_dir() // '/a-file/ckpt'

  ! This rank's rows of T(nx, ny), with one ghost layer.
  call block(nx, test_size, test_rank, i0, ni)
  allocate (t(0:ni + 1, 0:ny + 1))
  call set_field(1)
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'T', t(1:ni, 1:ny), [nx, ny], [i0, 0_c_int64_t])
  call cairn_state_add_scalar(st, 'step', step)
  call cairn_state_add_string(st, 'title', title)

  ! 1. Round trip.
  call cairn_async_save(st, a, MPI_COMM_WORLD, h, ierr=ierr)
  call check_ok(ierr, 'cairn_async_save')
  call cairn_async_test_staged(h, flag, ierr)
  call check_ok(ierr, 'cairn_async_test_staged')
  call cairn_async_wait_staged(h, ierr)
  call check_ok(ierr, 'cairn_async_wait_staged')
  call cairn_async_test_staged(h, flag, ierr)
  call check(flag, 'staged after wait_staged')
  t = -1
  step = -1
  title = 'scribbled'
  call cairn_async_wait_committed(h, sr, ierr)
  call check_ok(ierr, 'cairn_async_wait_committed')
  call check(sr%bytes_written == nx * ny * 8 .and. sr%entries == 3, 'result of the async save')
  call cairn_async_test_committed(h, flag, ierr=ierr)
  call check_ok(ierr, 'cairn_async_test_committed')
  call check(flag, 'committed after wait_committed')
  call cairn_async_free(h, ierr)
  call check_ok(ierr, 'cairn_async_free')
  call cairn_async_free(h)                       ! freed twice: harmless
  call check_checkpoint(a, 1)

  ! 2. The integer communicator, options, and a handle reused while it still
  !    holds a save (the earlier one is waited for).
  call set_field(2)
  call cairn_save_options_create(so)
  call cairn_save_options_set(so, overwrite=.true., files_per_rank=2)
  call cairn_async_save(st, b, MPI_COMM_WORLD%MPI_VAL, h, so, ierr)
  call check_ok(ierr, 'cairn_async_save (integer communicator)')
  call set_field(3)
  call cairn_async_save(st, c, MPI_COMM_WORLD, h2, so, ierr)
  call check_ok(ierr, 'second cairn_async_save')
  call set_field(4)
  call cairn_async_save(st, a, MPI_COMM_WORLD, h, so, ierr)   ! h still holds the save of b
  call check_ok(ierr, 'cairn_async_save on a used handle')
  call cairn_async_wait_committed(h, ierr=ierr)
  call check_ok(ierr, 'wait a')
  call cairn_async_wait_committed(h2, ierr=ierr)
  call check_ok(ierr, 'wait c')
  call cairn_async_free(h)
  call cairn_async_free(h2)
  call check_checkpoint(b, 2)
  call check_checkpoint(c, 3)
  call check_checkpoint(a, 4)

  ! 3. Freeing an unfinished handle waits for the save.
  call set_field(5)
  call cairn_async_save(st, b, MPI_COMM_WORLD, h, so, ierr)
  call check_ok(ierr, 'cairn_async_save before free')
  call cairn_async_free(h)
  call cairn_metadata_read(md, b, ierr)
  call check_ok(ierr, 'metadata of the save freed unfinished')
  call cairn_metadata_info(md, world_size=ws)
  call check(ws == test_size, 'world size of the save freed unfinished')
  call cairn_metadata_free(md)
  call check_checkpoint(b, 5)

  ! 4. Errors: an existing checkpoint without overwrite (planning: at once),
  !    an unwritable path; the same on every rank.
  call cairn_async_save(st, a, MPI_COMM_WORLD, h, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'already exists', 'async save without overwrite')
  call cairn_async_wait_committed(h, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the async save handle is NULL', 'wait on a failed save''s handle')
  call write_text_file(test_dir() // '/a-file')
  call cairn_async_save(st, bad, MPI_COMM_WORLD, h, so, ierr)
  if (ierr == CAIRN_SUCCESS) call cairn_async_wait_committed(h, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_WRITE, 'a-file/ckpt', 'async save to an unwritable path')
  call cairn_async_free(h)

  ! 5. A manager over a type(MPI_Comm), async.
  call cairn_manager_create(m, test_dir() // '/run', MPI_COMM_WORLD, keep_last=1, async=.true., ierr=ierr)
  call check_ok(ierr, 'cairn_manager_create (mpi_f08)')
  do s = 1, 3
    call set_field(int(s))
    call cairn_manager_save(m, s, st, flag, ierr=ierr)
    call check_ok(ierr, 'async manager save')
    call check(.not. flag, 'an async manager save is not committed on return')
    t = -1
  end do
  call cairn_manager_latest(m, s, found, ierr)
  call check_ok(ierr, 'latest')
  call check(found .and. s == 3, 'latest after async saves')
  call cairn_manager_free(m)
  call check_checkpoint(test_dir() // '/run/step_00000003', 3)

  call cairn_save_options_free(so)
  call cairn_state_free(st)
  deallocate (t)
  ! Main-program allocatables live until the end of the program; freed
  ! here so that LeakSanitizer (sanitized builds) sees nothing left.
  deallocate (a, b, c, bad)
  call test_finish('fortran_async')

contains

  real(c_double) function value(gi, gj, version)
    integer(c_int64_t), intent(in) :: gi, gj
    integer, intent(in) :: version
    value = 1000.0_c_double * gi + gj + 0.25_c_double * version
  end function value

  subroutine set_field(version)
    integer, intent(in) :: version
    t = 0
    do j = 1, ny
      do i = 1, ni
        t(i, j) = value(i0 + i - 1, j - 1, version)
      end do
    end do
    step = 100 + version
    title = 'version ' // itoa(version)
  end subroutine set_field

  ! Loads `path` split along the second dimension (another decomposition)
  ! and checks it holds `version`.
  subroutine check_checkpoint(path, version)
    character(len=*), intent(in) :: path
    integer, intent(in) :: version
    type(cairn_state) :: ls
    real(c_double), allocatable, target :: u(:, :)
    integer(c_int64_t), target :: lstep
    character(len=24), target :: ltitle
    integer(c_int64_t) :: j0, nj, p, q
    logical :: ok
    call block(ny, test_size, test_size - 1 - test_rank, j0, nj)
    allocate (u(nx, max(nj, 1_c_int64_t)))
    u = 0
    call cairn_state_create(ls)
    call cairn_state_add_array(ls, 'T', u(:, 1:nj), [nx, ny], [0_c_int64_t, j0])
    call cairn_state_add_scalar(ls, 'step', lstep)
    call cairn_state_add_string(ls, 'title', ltitle)
    call cairn_load(ls, path, MPI_COMM_WORLD, ierr=ierr)
    call check_ok(ierr, 'load ' // path)
    ok = .true.
    do q = 1, nj
      do p = 1, nx
        if (u(p, q) /= value(p - 1, j0 + q - 1, version)) ok = .false.
      end do
    end do
    call check(ok, path // ': values of version ' // itoa(version))
    call check(lstep == 100 + version, path // ': step')
    call check(ltitle == 'version ' // itoa(version), path // ': title')
    call cairn_state_free(ls)
    deallocate (u)
  end subroutine check_checkpoint

end program test_async
