! Downstream Fortran program of the install test, built by make (Makefile)
! with pkg-config's cairn-fortran: classic `use mpi` and default integers.
! Saves a block-distributed 2-d array and a step, loads them into cleared
! variables and checks every value. Prints "downstream: OK <version> on <n>
! ranks" on rank 0 and stops with 0 when everything matches; otherwise
! prints what differs and stops with 1.
!
!   mpiexec -n 2 downstream_fmake CHECKPOINT_DIR
program downstream_fmake
  use mpi
  use cairn
  implicit none
  integer, parameter :: n = 4, ny = 3
  integer :: rank, nranks, i, j, ierr, bad, total, step
  double precision, target :: field(n, ny)
  character(len=4096) :: path
  type(cairn_state) :: state
  type(cairn_save_options) :: options

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  path = 'downstream_fmake_ckpt'
  if (command_argument_count() > 0) call get_command_argument(1, path)

  ! Rows rank*n+1 .. rank*n+n of a global (n*nranks) x ny array.
  call fill()
  step = 42
  bad = 0

  call cairn_state_create(state)
  call cairn_state_add_array(state, 'field', field, [n * nranks, ny], [n * rank, 0])
  call cairn_state_add_scalar(state, 'step', step)
  call cairn_save_options_create(options)
  call cairn_save_options_set(options, overwrite=.true., alignment=4096)
  call cairn_save(state, trim(path), MPI_COMM_WORLD, options, ierr=ierr)
  if (ierr /= 0) then
    write (*, '(a)') 'downstream_fmake: save: ' // cairn_last_error()
    bad = bad + 1
  end if

  field = -1
  step = 0
  if (bad == 0) then
    call cairn_load(state, trim(path), MPI_COMM_WORLD, ierr=ierr)
    if (ierr /= 0) then
      write (*, '(a)') 'downstream_fmake: load: ' // cairn_last_error()
      bad = bad + 1
    end if
  end if
  do j = 1, ny
    do i = 1, n
      if (field(i, j) /= expected(i, j)) then
        write (*, '(a,i0,a,i0,a,i0,a,g0)') 'rank ', rank, ': field(', rank * n + i, ',', j, ') = ', field(i, j)
        bad = bad + 1
      end if
    end do
  end do
  if (step /= 42) then
    write (*, '(a,i0,a,i0)') 'rank ', rank, ': step = ', step
    bad = bad + 1
  end if
  call cairn_save_options_free(options)
  call cairn_state_free(state)

  call MPI_Allreduce(bad, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. total == 0) write (*, '(a,a,a,i0,a)') 'downstream: OK ', cairn_version(), ' on ', nranks, ' ranks'
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  double precision function expected(i, j)
    integer, intent(in) :: i, j
    expected = 100 * (rank * n + i) + j
  end function expected

  subroutine fill()
    do j = 1, ny
      do i = 1, n
        field(i, j) = expected(i, j)
      end do
    end do
  end subroutine fill
end program downstream_fmake
