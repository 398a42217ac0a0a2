! Fortran module, classic `mpi`, default integers throughout: no
! integer(c_int64_t) anywhere in this program. A 2-d array with a
! default-integer global_shape and offsets (and a 1-d one with a global_shape
! and no offsets), the integer options of save, load and the manager given as
! default integers (and a real one refused), the shape of an entry, and the
! steps of a manager, saved and loaded back.
program test_default_int
  use mpi
  use cairn
  use test_support
  implicit none
  integer, parameter :: nx = 13, ny = 5, nr = 4
  type(cairn_state) :: st, dst
  type(cairn_save_options) :: so
  type(cairn_load_options) :: lo
  type(cairn_metadata) :: md
  type(cairn_manager) :: m
  double precision, allocatable, target :: t(:, :)
  integer, target :: ids(3), rep(nr)
  integer :: i, j, i0, ni, ierr, idx, step, level
  integer, allocatable :: gshape(:), steps(:)
  logical :: found
  character(len=:), allocatable :: path, root

  call test_init()
  path = test_dir() // '/ckpt'
  root = test_dir() // '/run'

  ! This rank's rows i0+1 .. i0+ni of the nx x ny field; ghost cells around.
  ni = nx / test_size
  if (test_rank < mod(nx, test_size)) ni = ni + 1
  i0 = test_rank * (nx / test_size) + min(test_rank, mod(nx, test_size))
  allocate (t(0:ni + 1, 0:ny + 1))
  call fill(0)
  ids = [(100 * test_rank + i, i = 1, 3)]
  rep = [(10 * i, i = 1, nr)]

  call cairn_state_create(st)
  call cairn_state_add_array(st, 'T', t(1:ni, 1:ny), [nx, ny], [i0, 0], ierr)
  call check_ok(ierr, 'add T with default-integer shape and offsets')
  call cairn_state_add_array(st, 'ids', ids, [3 * test_size], [3 * test_rank], ierr)
  call check_ok(ierr, 'add ids')
  call cairn_state_add_array(st, 'rep', rep, [nr], ierr=ierr)   ! the whole array on every rank
  call check_ok(ierr, 'add rep with a global_shape and no offsets')
  call cairn_state_add_array(st, 'bad', ids, [3 * test_size], [0, 0], ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'offsets', 'offsets of the wrong rank')

  ! Options with default integers, ierr last.
  call cairn_save_options_create(so)
  call cairn_save_options_set(so, overwrite=.true., fsync=.false., alignment=4096, staging_bytes=1048576, &
                              writeback_bytes=0, checksum_block=65536, container_independent_below=1024, &
                              container_metadata_cache_bytes=1048576, files_per_rank=1, ierr=ierr)
  call check_ok(ierr, 'save options with default integers')
  call cairn_save_options_set(so, alignment=4096.0, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, &
                 'cairn_save_options_set: alignment must be an integer of the default kind or integer(c_int64_t)', &
                 'a real alignment')
  call cairn_load_options_create(lo)
  call cairn_load_options_set(lo, staging_bytes=65536, container_independent_below=0, &
                              container_metadata_cache_bytes=1048576, verify_checksums=.true., ierr=ierr)
  call check_ok(ierr, 'load options with default integers')
  call cairn_load_options_set(lo, staging_bytes=.true., ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'staging_bytes must be an integer', 'a logical staging_bytes')

  call cairn_save(st, path, MPI_COMM_WORLD, so, ierr=ierr)
  call check_ok(ierr, 'cairn_save')
  call fill(-1)
  ids = 0
  rep = 0
  call cairn_load(st, path, MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'cairn_load')
  do j = 1, ny
    do i = 1, ni
      call check(t(i, j) == value(i0 + i, j), 'T(' // itoa(i) // ',' // itoa(j) // ') loaded')
    end do
  end do
  call check(all(t(0, :) == 0) .and. all(t(ni + 1, :) == 0) .and. all(t(:, 0) == 0) .and. all(t(:, ny + 1) == 0), &
             'ghost cells untouched')
  call check(all(ids == [(100 * test_rank + i, i = 1, 3)]), 'ids loaded')
  call check(all(rep == [(10 * i, i = 1, nr)]), 'rep loaded')

  ! The global shape of an entry as default integers.
  call cairn_metadata_read(md, path)
  call cairn_metadata_find(md, 'T', idx)
  call cairn_metadata_entry_shape(md, idx, gshape)
  call check(size(gshape) == 2, 'T has two dimensions')
  call check(all(gshape == [nx, ny]), 'the global shape of T')
  call cairn_metadata_free(md)

  ! A device array with default-integer extents resolves (host memory here:
  ! added where no device is present, refused where one is).
  call cairn_state_create(dst)
  call cairn_state_add_device_array(dst, 'd', CAIRN_I32, c_loc_ids(), [3], [3 * test_size], [3 * test_rank], &
                                    [1], ierr)
  call check(ierr == CAIRN_SUCCESS .or. ierr == CAIRN_ERR_USAGE, 'add_device_array with default integers')
  call cairn_state_free(dst)

  ! A manager: keep_every and the steps as default integers.
  call cairn_manager_create(m, root, MPI_COMM_WORLD, keep_last=1, keep_every=20, save_options=so, ierr=ierr)
  call check_ok(ierr, 'cairn_manager_create with a default-integer keep_every')
  do step = 10, 40, 10
    call fill(step)
    call cairn_manager_save(m, step, st)
  end do
  call cairn_manager_latest(m, step, found, ierr)
  call check_ok(ierr, 'latest')
  call check(found .and. step == 40, 'latest is 40')
  call cairn_manager_steps(m, steps, ierr)
  call check_ok(ierr, 'steps')
  call check(size(steps) == 2, 'two steps kept: ' // itoa(size(steps)))
  if (size(steps) == 2) call check(all(steps == [20, 40]), 'steps 20 and 40 kept')
  call fill(-1)
  call cairn_manager_restore_latest(m, st, step, found, lo, ierr)
  call check_ok(ierr, 'restore_latest')
  call check(found .and. step == 40, 'restored step 40')
  call check(t(1, 1) == value(i0 + 1, 1) + 40, 'T of step 40 restored')
  call cairn_manager_last_restore(m, level, step, ierr=ierr)
  call check(ierr == CAIRN_SUCCESS .and. level == CAIRN_LEVEL_FILE_SYSTEM .and. step == 40, &
             'last_restore with a default-integer step')
  call cairn_manager_flush(m, step, ierr=ierr)
  call check(ierr == CAIRN_ERR_USAGE .and. step == -1, 'flush without a node-local level, default-integer step')
  call cairn_manager_free(m)

  call cairn_load_options_free(lo)
  call cairn_save_options_free(so)
  call cairn_state_free(st)
  call test_finish('fortran_default_int')

contains

  double precision function value(gi, gj)
    integer, intent(in) :: gi, gj
    value = 1000 * gi + gj
  end function value

  ! The interior: value + k (k < 0: zeros everywhere); the ghost cells 0.
  subroutine fill(k)
    integer, intent(in) :: k
    t = 0
    if (k < 0) return
    do j = 1, ny
      do i = 1, ni
        t(i, j) = value(i0 + i, j) + k
      end do
    end do
  end subroutine fill

  function c_loc_ids() result(p)
    use, intrinsic :: iso_c_binding, only: c_ptr, c_loc
    type(c_ptr) :: p
    p = c_loc(ids)
  end function c_loc_ids
end program test_default_int
