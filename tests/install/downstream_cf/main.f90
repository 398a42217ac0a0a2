! Downstream Fortran program of the install test: saves a state through an
! installed Cairn's Fortran module, loads it into cleared arrays and checks
! every value. Prints "downstream: OK <version> on <n> ranks" on rank 0 and
! stops with 0 when everything matches; otherwise prints what differs and
! stops with 1.
!
!   mpiexec -n 2 downstream_f CHECKPOINT_DIR
program downstream_f
  use mpi_f08
  use cairn
  implicit none
  integer, parameter :: n = 5
  integer :: rank, size, i, ierr, bad, total
  real(8) :: field(n)
  integer(8) :: step
  character(len=4096) :: path
  type(cairn_state) :: state
  type(cairn_save_options) :: options

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  path = 'downstream_f_ckpt'
  if (command_argument_count() > 0) call get_command_argument(1, path)

  ! Each rank holds 5 elements of a global array of 5 * size.
  do i = 1, n
    field(i) = 0.25d0 * (rank * n + i - 1)
  end do
  step = 42
  bad = 0

  call cairn_state_create(state)
  call cairn_state_add_array(state, 'field', field, [int(n * size, 8)], [int(n * rank, 8)])
  call cairn_state_add_scalar(state, 'step', step)
  call cairn_save_options_create(options)
  call cairn_save_options_set(options, overwrite=.true.)
  call cairn_save(state, trim(path), MPI_COMM_WORLD, options, ierr=ierr)
  if (ierr /= 0) then
    write (*, '(a)') 'downstream_f: save: ' // cairn_last_error()
    bad = bad + 1
  end if

  field = -1
  step = 0
  if (bad == 0) then
    call cairn_load(state, trim(path), MPI_COMM_WORLD, ierr=ierr)
    if (ierr /= 0) then
      write (*, '(a)') 'downstream_f: load: ' // cairn_last_error()
      bad = bad + 1
    end if
  end if
  do i = 1, n
    if (field(i) /= 0.25d0 * (rank * n + i - 1)) then
      write (*, '(a,i0,a,i0,a,g0)') 'rank ', rank, ': field(', rank * n + i, ') = ', field(i)
      bad = bad + 1
    end if
  end do
  if (step /= 42) then
    write (*, '(a,i0,a,i0)') 'rank ', rank, ': step = ', step
    bad = bad + 1
  end if
  call cairn_save_options_free(options)
  call cairn_state_free(state)

  call MPI_Allreduce(bad, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0 .and. total == 0) write (*, '(a,a,a,i0,a)') 'downstream: OK ', cairn_version(), ' on ', size, ' ranks'
  call MPI_Finalize()
  if (total /= 0) stop 1
end program downstream_f
