! Fortran module: arrays of every kind (real(4), real(8), integer(4),
! integer(8), logical, logical(c_bool)) and rank 1..7 round-trip and reshard
! (roundtrip_kind.inc); then a C program's view of the same checkpoints
! (check_layout.c) shows that Fortran's A(i1, i2, ...) is C's [i1][i2]... .
! Uses mpi_f08 communicators.


module rt_r4
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#define T real(c_float)
#define VALUE(x) real(x, c_float)
#define SENTINEL (-7.0_c_float)
#define SAME(a, b) ((a) == (b))
#define KIND_NAME 'r4'
#include "roundtrip_kind.inc"
end module rt_r4

module rt_r8
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#undef T
#undef VALUE
#undef SENTINEL
#undef KIND_NAME
#define T real(c_double)
#define VALUE(x) real(x, c_double)
#define SENTINEL (-7.0_c_double)
#define KIND_NAME 'r8'
#include "roundtrip_kind.inc"
end module rt_r8

module rt_i4
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#undef T
#undef VALUE
#undef SENTINEL
#undef KIND_NAME
#define T integer(c_int32_t)
#define VALUE(x) int(x, c_int32_t)
#define SENTINEL (-7_c_int32_t)
#define KIND_NAME 'i4'
#include "roundtrip_kind.inc"
end module rt_i4

module rt_i8
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#undef T
#undef VALUE
#undef SENTINEL
#undef KIND_NAME
#define T integer(c_int64_t)
#define VALUE(x) (int(x, c_int64_t) * 3000000000_c_int64_t)
#define SENTINEL (-7_c_int64_t)
#define KIND_NAME 'i8'
#include "roundtrip_kind.inc"
end module rt_i8

module rt_l
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#undef T
#undef VALUE
#undef SENTINEL
#undef SAME
#undef KIND_NAME
#define T logical
#define VALUE(x) (mod(x, 3_c_int64_t) == 0)
#define SENTINEL .true.
#define SAME(a, b) ((a) .eqv. (b))
#define KIND_NAME 'l'
#include "roundtrip_kind.inc"
end module rt_l

module rt_lb
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use cairn
  use test_support
  implicit none
#undef T
#undef VALUE
#undef SENTINEL
#undef KIND_NAME
#define T logical(c_bool)
#define VALUE(x) logical(mod(x, 3_c_int64_t) == 0, c_bool)
#define SENTINEL .true._c_bool
#define KIND_NAME 'lb'
#include "roundtrip_kind.inc"
end module rt_lb

program test_arrays
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use test_support
  use rt_r4, only: run_r4 => run_kind
  use rt_r8, only: run_r8 => run_kind
  use rt_i4, only: run_i4 => run_kind
  use rt_i8, only: run_i8 => run_kind
  use rt_l, only: run_l => run_kind
  use rt_lb, only: run_lb => run_kind
  implicit none
  interface
    ! check_layout.c: loads the arrays of `kind_name` with the C API as
    ! row-major C arrays and counts the elements that differ.
    integer(c_int) function check_layout(path, kind_name, comm) bind(C, name="check_layout")
      import :: c_char, c_int
      character(kind=c_char), intent(in) :: path(*), kind_name(*)
      integer(c_int), value :: comm
    end function check_layout
  end interface
  character(len=2) :: kinds(6) = ['r4', 'r8', 'i4', 'i8', 'l ', 'lb']
  integer :: k

  call test_init()
  call run_r4(MPI_COMM_WORLD)
  call run_r8(MPI_COMM_WORLD)
  call run_i4(MPI_COMM_WORLD)
  call run_i8(MPI_COMM_WORLD)
  call run_l(MPI_COMM_WORLD)
  call run_lb(MPI_COMM_WORLD)
  do k = 1, size(kinds)
    call check(check_layout(test_dir() // '/' // trim(kinds(k)) // '_from' // itoa(test_size) // c_null_char, &
                            trim(kinds(k)) // c_null_char, int(MPI_COMM_WORLD%MPI_VAL, c_int)) == 0, &
               'the C view of the ' // trim(kinds(k)) // ' arrays')
  end do
  call test_finish('fortran_arrays')
end program test_arrays
