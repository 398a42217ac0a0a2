! Fortran module: the node-local level of the checkpoint manager. Each rank
! its own node (ranks_per_node=1) with its storage under <test dir>/node%n,
! partner redundancy from 2 ranks on: steps saved node-locally, one drained
! into the root (cairn_manager_flush), one node's directory wiped, then a
! new manager restores the newest step from node-local storage with that
! node's files rebuilt (cairn_manager_last_restore), values intact;
! cairn_manager_levels says which levels hold each step. An async manager's
! node-local save returns once staged and is committed in the background.
program test_levels
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  use test_support
  implicit none
  integer(c_int64_t), parameter :: n = 1000
  type(cairn_state) :: st
  type(cairn_manager) :: m
  real(c_double), target :: x(n)
  integer(c_int64_t), target :: step
  integer(c_int64_t) :: i, off, got, drained, moved
  integer :: ierr, level, rebuilt
  logical :: found, started, there, committed
  character(len=:), allocatable :: root, local, redundancy
  integer(c_int64_t), allocatable :: steps(:)
  integer, allocatable :: levels(:)

  call test_init(thread_multiple=.true.) ! for the async manager
  root = test_dir() // '/run'
  local = test_dir() // '/node%n'
  redundancy = 'none'
  if (test_size > 1) redundancy = 'partner'
  off = n * test_rank
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'x', x, [n * test_size], [off])
  call cairn_state_add_scalar(st, 'step', step)

  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=local, redundancy=redundancy, flush_every=0, &
                            ranks_per_node=1, ierr=ierr)
  call check_ok(ierr, 'create with a node-local level')
  call cairn_manager_last_restore(m, level, got, ierr=ierr)
  call check(ierr == CAIRN_SUCCESS .and. level == CAIRN_LEVEL_NONE .and. got == -1, 'nothing restored yet')
  do step = 1, 3
    x = [(value(off + i - 1, step), i = 1, n)]
    call cairn_manager_save(m, step, st, ierr=ierr)
    call check_ok(ierr, 'node-local save of step ' // itoa(int(step)))
    if (step == 2) then
      call cairn_manager_flush(m, drained, started, ierr)
      call check(ierr == CAIRN_SUCCESS .and. started .and. drained == 2, 'flush drains step 2')
      call cairn_manager_wait(m, ierr=ierr)
      call check_ok(ierr, 'the drain committed')
    end if
  end do
  call cairn_manager_levels(m, steps, levels, ierr)
  call check_ok(ierr, 'levels')
  call check(size(steps) == 2, 'two steps held')
  if (size(steps) == 2) then
    call check(steps(1) == 2 .and. levels(1) == CAIRN_STEP_NODE_LOCAL + CAIRN_STEP_FILE_SYSTEM, 'step 2: both levels')
    call check(steps(2) == 3 .and. levels(2) == CAIRN_STEP_NODE_LOCAL, 'step 3: node-local')
  end if
  call cairn_manager_free(m)
  inquire (file=root // '/step_00000002/metadata.h5', exist=there)
  call check(there, 'step 2 in the root')
  inquire (file=root // '/step_00000003/metadata.h5', exist=there)
  call check(.not. there, 'step 3 node-local only')

  ! Node 1 loses its storage.
  if (test_size > 1 .and. test_rank == 0) &
    call execute_command_line('rm -rf "' // test_dir() // '/node1"', exitstat=ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  x = -1
  step = -1
  call cairn_manager_create(m, root, MPI_COMM_WORLD, local_dir=local, redundancy=redundancy, flush_every=0, &
                            ranks_per_node=1, ierr=ierr)
  call check_ok(ierr, 'a new manager')
  call cairn_manager_restore_latest(m, st, got, found, ierr=ierr)
  call check(ierr == CAIRN_SUCCESS .and. found .and. got == 3 .and. step == 3, 'restored step 3')
  call check(all(x == [(value(off + i - 1, 3_c_int64_t), i = 1, n)]), 'restored values')
  call cairn_manager_last_restore(m, level, got, rebuilt, moved, ierr)
  call check(ierr == CAIRN_SUCCESS .and. level == CAIRN_LEVEL_NODE_LOCAL .and. got == 3, 'from node-local storage')
  if (test_size > 1) call check(rebuilt > 0 .and. moved > 0, 'the wiped node''s files rebuilt')
  call cairn_manager_free(m)

  ! Async: the save returns once staged; the rest runs in the background.
  call cairn_manager_create(m, root, MPI_COMM_WORLD, async=.true., local_dir=local, redundancy=redundancy, &
                            flush_every=0, ranks_per_node=1, ierr=ierr)
  call check_ok(ierr, 'an async manager')
  step = 4
  x = [(value(off + i - 1, 4_c_int64_t), i = 1, n)]
  call cairn_manager_save(m, step, st, committed=committed, ierr=ierr)
  call check(ierr == CAIRN_SUCCESS .and. .not. committed, 'async save of step 4 staged')
  x = -1
  step = -1
  call cairn_manager_wait(m, ierr=ierr)
  call check_ok(ierr, 'the async save committed')
  call cairn_manager_restore_latest(m, st, got, found, ierr=ierr)
  call check(ierr == CAIRN_SUCCESS .and. found .and. got == 4 .and. step == 4, 'restored step 4')
  call check(all(x == [(value(off + i - 1, 4_c_int64_t), i = 1, n)]), 'restored values of step 4')
  call cairn_manager_free(m)

  ! Without a node-local level there is nothing to flush into.
  call cairn_manager_create(m, root, MPI_COMM_WORLD, ierr=ierr)
  call cairn_manager_flush(m, started=started, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'node-local', 'flush without a node-local level')
  call check(.not. started, 'nothing started')
  call cairn_manager_free(m)

  call cairn_state_free(st)
  deallocate (root, local, redundancy, steps, levels)
  call test_finish('fortran_levels')

contains

  real(c_double) function value(gi, s)
    integer(c_int64_t), intent(in) :: gi, s
    value = 0.25d0 * real(gi, c_double) + 1000.0d0 * real(s, c_double)
  end function value

end program test_levels
