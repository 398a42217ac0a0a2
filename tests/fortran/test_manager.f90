! Fortran module, classic `mpi`: the checkpoint manager. Steps saved with
! keep_last = 2 (retention, LATEST), latest / restore_latest on an empty
! root, a restart on fewer ranks with another decomposition, keep_every, the
! container layout, async saves, and errors through ierr.
program test_manager
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  use test_support
  implicit none
  integer(c_int64_t), parameter :: nx = 11, ny = 6
  type(cairn_state) :: st
  type(cairn_manager) :: m
  type(cairn_save_options) :: so
  type(cairn_save_result) :: sr
  real(c_double), allocatable, target :: t(:, :)
  integer(c_int64_t), target :: step
  integer(c_int64_t) :: i0, ni, got
  integer :: ierr, s, sub, color
  logical :: found, committed, saved
  integer(c_int64_t), allocatable :: steps(:)
  integer :: nleft
  character(len=:), allocatable :: lpath, lwhy
  character(len=:), allocatable :: root, every, h5, async_root

  call test_init(thread_multiple=.true.)
  root = test_dir() // '/run'
  every = test_dir() // '/every'
  h5 = test_dir() // '/container'
  async_root = test_dir() // '/async'

  call block(nx, test_size, test_rank, i0, ni)
  allocate (t(0:ni + 1, 0:ny + 1))
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'T', t(1:ni, 1:ny), [nx, ny], [i0, 0_c_int64_t])
  call cairn_state_add_scalar(st, 'step', step)
  call cairn_save_options_create(so)
  call cairn_save_options_set(so, fsync=.false.)

  ! 1. An empty root.
  call cairn_manager_create(m, root, MPI_COMM_WORLD, keep_last=2, save_options=so, ierr=ierr)
  call check_ok(ierr, 'cairn_manager_create')
  call cairn_manager_latest(m, got, found, ierr)
  call check_ok(ierr, 'latest of an empty root')
  call check(.not. found .and. got == -1, 'nothing in an empty root')
  call set_field(3_c_int64_t)
  call cairn_manager_restore_latest(m, st, got, found, ierr=ierr)
  call check_ok(ierr, 'restore_latest of an empty root')
  call check(.not. found .and. got == -1 .and. step == 3, 'restore_latest of an empty root leaves the state')
  call cairn_manager_wait(m, saved, ierr=ierr)
  call check_ok(ierr, 'wait with nothing in flight')
  call check(.not. saved, 'nothing was in flight')

  ! 2. Steps 10..50 (a default integer step), keep_last = 2.
  do s = 10, 50, 10
    call set_field(int(s, c_int64_t))
    call cairn_manager_save(m, s, st, committed, sr, ierr)
    call check_ok(ierr, 'cairn_manager_save ' // itoa(s))
    call check(committed .and. sr%bytes_written == nx * ny * 8 .and. sr%entries == 2, 'save result ' // itoa(s))
    call cairn_manager_latest(m, got, found)
    call check(found .and. got == s, 'latest is ' // itoa(s))
  end do
  call check(.not. exists(root // '/step_00000010/metadata.h5'), 'step 10 removed')
  call check(.not. exists(root // '/step_00000030/metadata.h5'), 'step 30 removed')
  call check(exists(root // '/step_00000040/metadata.h5'), 'step 40 kept')
  call check(exists(root // '/step_00000050/metadata.h5'), 'step 50 kept')
  call check(read_latest(root) == 'step_00000050', 'LATEST names step 50')
  ! Errors, the same on every rank; the manager is still usable after them.
  if (test_size > 1) then
    call cairn_manager_save(m, 60 + min(test_rank, 1), st, ierr=ierr)
    call check_err(ierr, CAIRN_ERR_MISMATCH, 'the ranks passed different steps (60 to 61)', 'different steps')
  end if
  call cairn_manager_save(m, -5, st, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'step must be at least 0, not -5', 'negative step')
  call cairn_manager_latest(m, got, found)
  call check(found .and. got == 50, 'failed saves change nothing')
  call cairn_manager_free(m)
  call cairn_manager_free(m)                         ! freed twice: harmless
  call cairn_manager_latest(m, got, found, ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the manager handle is NULL', 'latest of a freed manager')

  ! 3. Restart on all ranks and on all but the last, split along dimension 2.
  call check_restore(MPI_COMM_WORLD, root, 50_c_int64_t)
  color = 0
  if (test_size > 1 .and. test_rank == test_size - 1) color = MPI_UNDEFINED
  call MPI_Comm_split(MPI_COMM_WORLD, color, test_rank, sub, ierr)
  if (sub /= MPI_COMM_NULL) then
    call check_restore(sub, root, 50_c_int64_t)
    call MPI_Comm_free(sub, ierr)
  end if

  ! 4. keep_every: keep_last 1 and every multiple of 20.
  call cairn_manager_create(m, every, MPI_COMM_WORLD, keep_last=1, keep_every=20_c_int64_t, save_options=so)
  do s = 10, 50, 10
    call set_field(int(s, c_int64_t))
    call cairn_manager_save(m, int(s, c_int64_t), st)
  end do
  ! steps, and leftovers found (path, reason) then removed.
  call cairn_manager_steps(m, steps, ierr)
  call check_ok(ierr, 'cairn_manager_steps')
  call check(size(steps) == 3, 'three steps kept')
  if (size(steps) == 3) call check(all(steps == [20_c_int64_t, 40_c_int64_t, 50_c_int64_t]), 'steps 20, 40, 50')
  call cairn_manager_leftovers(m, nleft, ierr=ierr)
  call check_ok(ierr, 'cairn_manager_leftovers')
  call check(nleft == 0, 'no leftovers yet')
  call write_text_file(every // '/LATEST.cairn-tmp') ! rank 0 writes it; every rank returns after
  call cairn_manager_leftovers(m, nleft)
  call check(nleft == 1, 'one leftover found')
  call cairn_manager_leftover(m, 1, lpath, lwhy, ierr)
  call check_ok(ierr, 'cairn_manager_leftover')
  call check(lpath == every // '/LATEST.cairn-tmp' .and. index(lwhy, 'LATEST') > 0, 'its path and reason')
  call cairn_manager_leftover(m, 2, lpath, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'leftover 1 of 1', 'leftover out of range')
  call cairn_manager_leftovers(m, nleft, remove=.true.)
  call check(nleft == 1, 'one leftover removed')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call check(.not. exists(every // '/LATEST.cairn-tmp'), 'the leftover is gone')
  call cairn_manager_free(m)
  call check(.not. exists(every // '/step_00000010/metadata.h5') .and. exists(every // '/step_00000020/metadata.h5') &
             .and. .not. exists(every // '/step_00000030/metadata.h5') .and. &
             exists(every // '/step_00000040/metadata.h5') .and. exists(every // '/step_00000050/metadata.h5'), &
             'keep_every 20 with keep_last 1')

  ! 5. The container layout.
  call cairn_manager_create(m, h5, MPI_COMM_WORLD, layout=CAIRN_LAYOUT_CONTAINER, ierr=ierr)
  call check_ok(ierr, 'create (container)')
  call set_field(7_c_int64_t)
  call cairn_manager_save(m, 7, st, committed)
  call check(committed, 'container save committed')
  call cairn_manager_free(m)
  call check(exists(h5 // '/step_00000007.h5'), 'container file')
  call check(read_latest(h5) == 'step_00000007.h5', 'LATEST names the container')
  call check_restore(MPI_COMM_WORLD, h5, 7_c_int64_t)

  ! 6. Async: the arrays are overwritten as soon as save returns.
  call cairn_manager_create(m, async_root, MPI_COMM_WORLD, async=.true., save_options=so, ierr=ierr)
  call check_ok(ierr, 'create (async)')
  do s = 1, 3
    call set_field(int(s, c_int64_t))
    call cairn_manager_save(m, s, st, committed, ierr=ierr)
    call check_ok(ierr, 'async save ' // itoa(s))
    call check(.not. committed, 'async save not committed on return')
    t = -1
    step = -1
  end do
  call cairn_manager_wait(m, saved, sr, ierr)
  call check_ok(ierr, 'wait (async)')
  call check(saved .and. sr%bytes_written == nx * ny * 8, 'the async save was settled by wait')
  call cairn_manager_latest(m, got, found)
  call check(found .and. got == 3, 'latest after async saves')
  call cairn_manager_free(m)
  call check(read_latest(async_root) == 'step_00000003', 'LATEST after async saves')
  call check(.not. exists(async_root // '/step_00000001/metadata.h5'), 'async retention')
  call check_restore(MPI_COMM_WORLD, async_root, 3_c_int64_t)

  ! 7. Argument errors, on every rank.
  call cairn_manager_create(m, root, MPI_COMM_WORLD, keep_last=-1, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'keep_last must be at least 0', 'keep_last -1')
  call cairn_manager_create(m, root, MPI_COMM_WORLD, layout=5, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid layout 5', 'layout 5')
  call cairn_manager_create(m, '', MPI_COMM_WORLD, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'empty root directory', 'empty root')
  ! The node-local level's options: refused values name themselves, on
  ! every rank (a different value on rank 0 only: still every rank fails).
  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', redundancy='mirror', ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "redundancy 'mirror': expected none, partner, xor or xor:K with K >= 2", &
                 'redundancy mirror')
  if (test_rank == 0) then
    call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', redundancy='xor:1', ierr=ierr)
  else
    call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', redundancy='xor:3', ierr=ierr)
  end if
  call check_err(ierr, CAIRN_ERR_USAGE, "redundancy 'xor:1'", 'redundancy xor:1 on rank 0')
  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', local_keep_last=0, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the node-local keep_last must be at least 1, not 0', 'local_keep_last 0')
  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', flush_every=-1, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'flush_every must be at least 0', 'flush_every -1')
  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=test_dir() // '/node%n', ranks_per_node=-1, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'ranks_per_node must be at least 0', 'ranks_per_node -1')

  call cairn_save_options_free(so)
  call cairn_state_free(st)
  deallocate (t)
  ! Main-program allocatables live until the end of the program; freed
  ! here so that LeakSanitizer (sanitized builds) sees nothing left.
  deallocate (root, every, h5, async_root, steps, lpath, lwhy)
  call test_finish('fortran_manager')

contains

  real(c_double) function value(gi, gj, version)
    integer(c_int64_t), intent(in) :: gi, gj, version
    value = 100.0_c_double * gi + gj + 0.5_c_double * version
  end function value

  subroutine set_field(version)
    integer(c_int64_t), intent(in) :: version
    integer(c_int64_t) :: i, j
    t = 0
    do j = 1, ny
      do i = 1, ni
        t(i, j) = value(i0 + i - 1, j - 1, version)
      end do
    end do
    step = version
  end subroutine set_field

  logical function exists(path)
    character(len=*), intent(in) :: path
    inquire (file=path, exist=exists)
  end function exists

  function read_latest(dir) result(name)
    character(len=*), intent(in) :: dir
    character(len=:), allocatable :: name
    character(len=256) :: line
    integer :: u, ios
    line = ''
    open (newunit=u, file=dir // '/LATEST', status='old', action='read', iostat=ios)
    if (ios == 0) then
      read (u, '(a)', iostat=ios) line
      close (u)
    end if
    name = trim(line)
  end function read_latest

  ! Restores the latest checkpoint of `dir` over `comm`, split along the
  ! second dimension, and checks it is the one of `expected`.
  subroutine check_restore(comm, dir, expected)
    integer, intent(in) :: comm
    character(len=*), intent(in) :: dir
    integer(c_int64_t), intent(in) :: expected
    type(cairn_manager) :: rm
    type(cairn_state) :: ls
    real(c_double), allocatable, target :: u(:, :)
    integer(c_int64_t), target :: lstep
    integer(c_int64_t) :: j0, nj, p, q, rstep
    integer :: rank, size, e
    logical :: ok, f
    call MPI_Comm_rank(comm, rank, e)
    call MPI_Comm_size(comm, size, e)
    call block(ny, size, rank, j0, nj)
    allocate (u(nx, max(nj, 1_c_int64_t)))
    u = 0
    lstep = -9
    call cairn_state_create(ls)
    call cairn_state_add_array(ls, 'T', u(:, 1:nj), [nx, ny], [0_c_int64_t, j0])
    call cairn_state_add_scalar(ls, 'step', lstep)
    call cairn_manager_create(rm, dir, comm, ierr=e)
    call check_ok(e, 'create for the restore of ' // dir)
    call cairn_manager_restore_latest(rm, ls, rstep, f, ierr=e)
    call check_ok(e, 'restore_latest of ' // dir // ' on ' // itoa(size) // ' ranks')
    call check(f .and. rstep == expected .and. lstep == expected, 'restored step of ' // dir)
    ok = .true.
    do q = 1, nj
      do p = 1, nx
        if (u(p, q) /= value(p - 1, j0 + q - 1, expected)) ok = .false.
      end do
    end do
    call check(ok, 'restored values of ' // dir // ' on ' // itoa(size) // ' ranks')
    call cairn_manager_free(rm)
    call cairn_state_free(ls)
    deallocate (u)
  end subroutine check_restore

end program test_manager
