! Without ierr, an error stops the program with the message: run by CTest,
! which expects the message and a failure.
program test_fatal
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  implicit none
  type(cairn_state) :: st
  real(c_double), target :: x
  integer :: ierr
  call MPI_Init(ierr)
  call cairn_state_create(st)
  call cairn_state_add_scalar(st, 'x', x)
  call cairn_load(st, 'cairn-test-fatal-no-such-checkpoint', MPI_COMM_WORLD)
  print '(a)', 'not reached'
  call MPI_Finalize(ierr)
end program test_fatal
