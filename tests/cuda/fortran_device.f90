! The Fortran module and device memory (cairn_state_add_device_array), with
! device memory from cudaMalloc bound through iso_c_binding.
!
! With a usable CUDA device on every rank: the interior T(1:lnx, 1:ny) of a
! device array T(0:lnx+1, 0:ny+1) (explicit strides) saved in both layouts,
! loaded whole into a host array, back into device memory (ghosts untouched)
! and resharded into dense device blocks of the other dimension (default
! strides); pageable host memory declared as device memory is refused by
! name.
!
! Without one (the machines CI runs on): the array is accepted, and the save
! fails on every rank with CAIRN_ERR_USAGE, naming the array, and leaves the
! checkpoint it would replace intact.
!
! On both: wrong argument sizes are refused by name before anything runs.
program fortran_device
  use, intrinsic :: iso_c_binding
  use cairn
  use test_support
  use mpi
  implicit none

  interface
    integer(c_int) function cudaGetDeviceCount(n) bind(C, name="cudaGetDeviceCount")
      import :: c_int
      integer(c_int), intent(out) :: n
    end function cudaGetDeviceCount
    integer(c_int) function cudaSetDevice(d) bind(C, name="cudaSetDevice")
      import :: c_int
      integer(c_int), value :: d
    end function cudaSetDevice
    integer(c_int) function cudaMalloc(p, bytes) bind(C, name="cudaMalloc")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), intent(out) :: p
      integer(c_size_t), value :: bytes
    end function cudaMalloc
    integer(c_int) function cudaFree(p) bind(C, name="cudaFree")
      import :: c_int, c_ptr
      type(c_ptr), value :: p
    end function cudaFree
    integer(c_int) function cudaMemcpy(dst, src, bytes, kind) bind(C, name="cudaMemcpy")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: bytes
      integer(c_int), value :: kind
    end function cudaMemcpy
    integer(c_int) function cudaMemset(p, v, bytes) bind(C, name="cudaMemset")
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: p
      integer(c_int), value :: v
      integer(c_size_t), value :: bytes
    end function cudaMemset
  end interface
  integer(c_int), parameter :: host_to_device = 1, device_to_host = 2

  integer(c_int64_t), parameter :: nx = 23, ny = 17
  integer :: have, all_have, ierr

  call test_init()
  have = 0
  if (cairn_cuda_device_available()) have = 1
  call MPI_Allreduce(have, all_have, 1, MPI_INTEGER, MPI_MIN, MPI_COMM_WORLD, ierr)
  call argument_errors()
  if (all_have == 1) then
    call with_device()
  else
    call without_device()
  end if
  if (test_rank == 0) then
    if (all_have == 1) then
      print '(a)', 'fortran_device: with a device'
    else
      print '(a)', 'fortran_device: without a device'
    end if
  end if
  call test_finish('fortran_device')

contains

  elemental real(c_double) function field(gi, gj)
    integer(c_int64_t), intent(in) :: gi, gj   ! 0-based global indices
    field = real(gi * 100 + gj, c_double) + 0.25d0
  end function field

  subroutine cuda_ok(rc, what)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what
    call check(rc == 0, what // ' failed with cudaError ' // itoa(int(rc)))
  end subroutine cuda_ok

  !> The device address `bytes` past `p`.
  type(c_ptr) function advance(p, bytes)
    type(c_ptr), intent(in) :: p
    integer(c_int64_t), intent(in) :: bytes
    advance = transfer(transfer(p, 0_c_intptr_t) + int(bytes, c_intptr_t), p)
  end function advance

  subroutine argument_errors()
    type(cairn_state) :: st
    real(c_double), target :: x(4, 3)
    integer :: rc, n
    call cairn_state_create(st)
    call cairn_state_add_device_array(st, 'short_strides', CAIRN_F64, c_loc(x), [4_c_int64_t, 3_c_int64_t], &
                                      [4_c_int64_t, 3_c_int64_t], strides=[1_c_int64_t], ierr=rc)
    call check_err(rc, CAIRN_ERR_USAGE, "array 'short_strides': strides has 1 values", 'strides of the wrong size')
    call cairn_state_add_device_array(st, 'no_global', CAIRN_F64, c_loc(x), [4_c_int64_t, 3_c_int64_t], &
                                      offsets=[0_c_int64_t, 0_c_int64_t], ierr=rc)
    call check_err(rc, CAIRN_ERR_USAGE, "array 'no_global': offsets given without a global shape", &
                   'offsets without a global shape')
    call cairn_state_add_device_array(st, 'bad_dtype', 99, c_loc(x), [4_c_int64_t, 3_c_int64_t], ierr=rc)
    call check_err(rc, CAIRN_ERR_USAGE, "array 'bad_dtype': invalid dtype code 99", 'an invalid dtype')
    call cairn_state_size(st, n)
    call check(n == 0, 'nothing added after errors')
    call cairn_state_free(st)
  end subroutine argument_errors

  subroutine with_device()
    integer(c_int64_t) :: i0, lnx, j0, lny, i, j, ld, count
    integer(c_size_t) :: bytes
    integer(c_int) :: ndev
    real(c_double), allocatable, target :: t(:, :), back(:, :), whole(:, :), cols(:, :)
    type(c_ptr) :: dev, dev2, dcols
    type(cairn_state) :: st, in
    character(len=6), parameter :: ids(2) = ['dev   ', 'dev.h5']
    character(len=:), allocatable :: path
    integer :: k, rc

    call cuda_ok(cudaGetDeviceCount(ndev), 'cudaGetDeviceCount')
    call cuda_ok(cudaSetDevice(int(mod(test_rank, int(ndev)), c_int)), 'cudaSetDevice')
    call block(nx, test_size, test_rank, i0, lnx)
    ld = lnx + 2
    allocate (t(0:lnx + 1, 0:ny + 1), back(0:lnx + 1, 0:ny + 1))
    t = -1.0d0
    do j = 1, ny
      do i = 1, lnx
        t(i, j) = field(i0 + i - 1, j - 1)
      end do
    end do
    count = ld * (ny + 2)
    bytes = int(count * 8, c_size_t)
    call cuda_ok(cudaMalloc(dev, bytes), 'cudaMalloc')
    call cuda_ok(cudaMemcpy(dev, c_loc(t), bytes, host_to_device), 'cudaMemcpy to the device')

    do k = 1, 2
      path = test_dir() // '/' // trim(ids(k))
      ! Save the interior: the address of T(1, 1), strides [1, lnx + 2].
      call cairn_state_create(st)
      call cairn_state_add_device_array(st, 'u', CAIRN_F64, advance(dev, (1 + ld) * 8), [lnx, ny], [nx, ny], &
                                        [i0, 0_c_int64_t], [1_c_int64_t, ld], ierr=rc)
      call check_ok(rc, 'add the device interior')
      call cairn_save(st, path, MPI_COMM_WORLD, ierr=rc)
      call check_ok(rc, 'save from device memory (' // trim(ids(k)) // ')')
      call cairn_state_free(st)

      ! Every rank loads the whole array into host memory.
      allocate (whole(nx, ny))
      whole = 0
      call cairn_state_create(in)
      call cairn_state_add_array(in, 'u', whole)
      call cairn_load(in, path, MPI_COMM_WORLD, ierr=rc)
      call check_ok(rc, 'load into host memory')
      call cairn_state_free(in)
      do j = 1, ny
        do i = 1, nx
          call check(whole(i, j) == field(i - 1, j - 1), 'value loaded into host memory (' // itoa(int(i)) // ', ' &
                     // itoa(int(j)) // ')')
        end do
      end do
      deallocate (whole)

      ! The same box back into zeroed device memory: the ghosts stay 0.
      call cuda_ok(cudaMalloc(dev2, bytes), 'cudaMalloc')
      call cuda_ok(cudaMemset(dev2, 0_c_int, bytes), 'cudaMemset')
      call cairn_state_create(in)
      call cairn_state_add_device_array(in, 'u', CAIRN_F64, advance(dev2, (1 + ld) * 8), [lnx, ny], [nx, ny], &
                                        [i0, 0_c_int64_t], [1_c_int64_t, ld], ierr=rc)
      call check_ok(rc, 'add the device destination')
      call cairn_load(in, path, MPI_COMM_WORLD, ierr=rc)
      call check_ok(rc, 'load into device memory')
      call cairn_state_free(in)
      call cuda_ok(cudaMemcpy(c_loc(back), dev2, bytes, device_to_host), 'cudaMemcpy to the host')
      call cuda_ok(cudaFree(dev2), 'cudaFree')
      do j = 0, ny + 1
        do i = 0, lnx + 1
          if (i == 0 .or. i == lnx + 1 .or. j == 0 .or. j == ny + 1) then
            call check(back(i, j) == 0.0d0, 'ghost cell left alone')
          else
            call check(back(i, j) == t(i, j), 'value loaded into device memory')
          end if
        end do
      end do

      ! Resharded: dense blocks of columns in device memory (default strides).
      call block(ny, test_size, test_rank, j0, lny)
      allocate (cols(nx, max(lny, 1_c_int64_t)))
      call cuda_ok(cudaMalloc(dcols, int(nx * max(lny, 1_c_int64_t) * 8, c_size_t)), 'cudaMalloc')
      call cairn_state_create(in)
      call cairn_state_add_device_array(in, 'u', CAIRN_F64, dcols, [nx, lny], [nx, ny], [0_c_int64_t, j0], ierr=rc)
      call check_ok(rc, 'add the dense device block')
      call cairn_load(in, path, MPI_COMM_WORLD, ierr=rc)
      call check_ok(rc, 'resharded load into device memory')
      call cairn_state_free(in)
      if (lny > 0) call cuda_ok(cudaMemcpy(c_loc(cols), dcols, int(nx * lny * 8, c_size_t), device_to_host), &
                                'cudaMemcpy to the host')
      call cuda_ok(cudaFree(dcols), 'cudaFree')
      do j = 1, lny
        do i = 1, nx
          call check(cols(i, j) == field(i - 1, j0 + j - 1), 'value resharded into device memory')
        end do
      end do
      deallocate (cols)
    end do

    ! Pageable host memory declared as device memory.
    call cairn_state_create(st)
    call cairn_state_add_device_array(st, 'pageable', CAIRN_F64, c_loc(t), [ld, ny + 2], ierr=rc)
    call check_err(rc, CAIRN_ERR_USAGE, "'pageable'", 'pageable host memory as device memory')
    call cairn_state_free(st)
    call cuda_ok(cudaFree(dev), 'cudaFree')
  end subroutine with_device

  subroutine without_device()
    integer(c_int64_t) :: i0, lnx, i
    real(c_double), allocatable, target :: vals(:), got(:)
    type(cairn_state) :: good, st, in
    type(cairn_save_options) :: o
    character(len=:), allocatable :: path
    integer :: rc

    call block(nx, test_size, test_rank, i0, lnx)
    allocate (vals(max(lnx, 1_c_int64_t)), got(nx))
    do i = 1, lnx
      vals(i) = field(i0 + i - 1, 0_c_int64_t)
    end do
    path = test_dir() // '/ckpt'
    ! A good checkpoint first, from host memory.
    call cairn_state_create(good)
    call cairn_state_add_array(good, 'u', vals(1:lnx), [nx], [i0])
    call cairn_save(good, path, MPI_COMM_WORLD)
    ! The same array declared as device memory: accepted (nothing to check it
    ! against), refused by the save on every rank.
    call cairn_state_create(st)
    call cairn_state_add_device_array(st, 'u', CAIRN_F64, c_loc(vals), [lnx], [nx], [i0], ierr=rc)
    call check_ok(rc, 'add host memory as device memory without a device')
    call cairn_save_options_create(o)
    call cairn_save_options_set(o, overwrite=.true.)
    call cairn_save(st, path, MPI_COMM_WORLD, o, ierr=rc)
    call check_err(rc, CAIRN_ERR_USAGE, "array 'u' is in CUDA device memory", 'the save without a device')
    if (test_rank == 0) print '(a)', 'the save without a device: ' // cairn_error_name(rc) // ': ' // cairn_last_error()
    ! The checkpoint it would have replaced is intact.
    got = 0
    call cairn_state_create(in)
    call cairn_state_add_array(in, 'u', got)
    call cairn_load(in, path, MPI_COMM_WORLD)
    do i = 1, nx
      call check(got(i) == field(i - 1, 0_c_int64_t), 'the old checkpoint intact')
    end do
    call cairn_save_options_free(o)
    call cairn_state_free(in)
    call cairn_state_free(st)
    call cairn_state_free(good)
  end subroutine without_device

end program fortran_device
