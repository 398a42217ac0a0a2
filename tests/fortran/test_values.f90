! Fortran module with the classic `mpi` module: scalars of every kind,
! strings, byte blobs, save and load options, partial loads, metadata, and
! errors reported through ierr with their messages.
program test_values
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  use test_support
  implicit none
  type(cairn_state) :: st
  type(cairn_save_options) :: so
  type(cairn_load_options) :: lo
  type(cairn_metadata) :: md
  type(cairn_save_result) :: sr
  type(cairn_load_result) :: lr
  real(c_float), target :: r4
  real(c_double), target :: r8
  integer(c_int32_t), target :: i4
  integer(c_int64_t), target :: i8, extra
  logical, target :: l, l2
  logical(c_bool), target :: lb
  character(len=24), target :: title
  character(len=3), target :: small
  character(len=0), target :: nothing
  integer(c_int8_t), target :: blob(10), blob_back(16)
  integer(c_size_t), target :: blob_size, back_size
  integer(c_int64_t), allocatable :: shp(:)
  character(len=:), allocatable :: path, name
  integer :: ierr, n, idx, kind, dtype, ndim, fv, ws, k, i, j
  real(c_double), target :: a(6, 5), b(3, 4), c(0:7, 0:2), col(6)

  call test_init()
  path = test_dir() // '/values'
  call check(len(cairn_version()) >= 5, 'cairn_version')
  call check(cairn_error_name(CAIRN_ERR_MISMATCH) == 'CAIRN_ERR_MISMATCH', 'cairn_error_name')

  ! ---- save -----------------------------------------------------------------
  r4 = 1.5
  r8 = -2.25d300
  i4 = -2000000000
  i8 = -9000000000000000000_c_int64_t
  l = .true.
  l2 = .false.
  lb = .true._c_bool
  title = 'heat 2-D, run #7'
  blob = [(int(k * 11 - 40, c_int8_t), k = 1, 10)]
  blob_size = 7
  call cairn_state_create(st, ierr)
  call check_ok(ierr, 'cairn_state_create')
  call cairn_state_add_scalar(st, 'r4', r4, ierr)
  call check_ok(ierr, 'add r4')
  call cairn_state_add_scalar(st, 'r8', r8, ierr)
  call check_ok(ierr, 'add r8')
  call cairn_state_add_scalar(st, 'i4', i4, ierr)
  call check_ok(ierr, 'add i4')
  call cairn_state_add_scalar(st, 'i8', i8, ierr)
  call check_ok(ierr, 'add i8')
  call cairn_state_add_scalar(st, 'l', l)                 ! without ierr: must succeed
  call cairn_state_add_scalar(st, 'l2', l2)
  call cairn_state_add_scalar(st, 'lb', lb)
  call cairn_state_add_string(st, 'title', title, ierr)
  call check_ok(ierr, 'add title')
  call cairn_state_add_string(st, 'nothing', nothing, ierr)
  call check_ok(ierr, 'add nothing')
  call cairn_state_add_bytes(st, 'blob', blob, blob_size, ierr)
  call check_ok(ierr, 'add blob')
  call cairn_state_size(st, n)
  call check(n == 10, 'cairn_state_size')
  call cairn_state_add_scalar(st, 'r4 ', r4, ierr)   ! trailing blanks are not part of a name
  call check_err(ierr, CAIRN_ERR_USAGE, "duplicate entry name 'r4'", 'duplicate name')

  call cairn_save_options_create(so)
  call cairn_save_options_set(so, overwrite=.true., fsync=.false., files_per_rank=2, &
                              alignment=256_c_int64_t, staging_bytes=8192_c_int64_t, &
                              writeback_bytes=1048576_c_int64_t, ierr=ierr)
  call check_ok(ierr, 'cairn_save_options_set')
  call cairn_save_options_set(so, files_per_rank=0, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'files_per_rank must be at least 1', 'files_per_rank 0')
  call cairn_save(st, path, MPI_COMM_WORLD, so, sr, ierr)
  call check_ok(ierr, 'cairn_save')
  call check(sr%entries == 10 .and. sr%bytes_written == 7, 'save result')
  call check(sr%plan_reused == 0, 'no plan reused without reuse_plan')
  call cairn_save_options_set(so, reuse_plan=.true., ierr=ierr)
  call check_ok(ierr, 'cairn_save_options_set reuse_plan')
  call cairn_save(st, path, MPI_COMM_WORLD, so, sr, ierr)
  call check_ok(ierr, 'save keeping the plan')
  call check(sr%plan_reused == 0, 'the first save with reuse_plan plans')
  call cairn_save(st, path, MPI_COMM_WORLD, so, sr, ierr)
  call check_ok(ierr, 'save reusing the plan')
  call check(sr%plan_reused == 1 .and. sr%entries == 10, 'the second save with reuse_plan reuses the plan')
  call cairn_save(st, path, MPI_COMM_WORLD, ierr=ierr)  ! no overwrite: refused
  call check_err(ierr, CAIRN_ERR_USAGE, 'already exists', 'save without overwrite')
  call cairn_state_free(st)
  call cairn_state_free(st)   ! twice is fine

  ! ---- load ------------------------------------------------------------------
  r4 = 0
  r8 = 0
  i4 = 0
  i8 = 0
  l = .false.
  l2 = .true.
  lb = .false._c_bool
  title = 'x'
  blob_back = 0
  back_size = 0
  call cairn_state_create(st)
  call cairn_state_add_scalar(st, 'r4', r4)
  call cairn_state_add_scalar(st, 'r8', r8)
  call cairn_state_add_scalar(st, 'i4', i4)
  call cairn_state_add_scalar(st, 'i8', i8)
  call cairn_state_add_scalar(st, 'l', l)
  call cairn_state_add_scalar(st, 'l2', l2)
  call cairn_state_add_scalar(st, 'lb', lb)
  call cairn_state_add_string(st, 'title', title)
  call cairn_state_add_string(st, 'nothing', nothing)
  call cairn_state_add_bytes(st, 'blob', blob_back, back_size)
  call cairn_load(st, path, MPI_COMM_WORLD, result=lr, ierr=ierr)
  call check_ok(ierr, 'cairn_load')
  call check(r4 == 1.5 .and. r8 == -2.25d300, 'real scalars')
  call check(i4 == -2000000000 .and. i8 == -9000000000000000000_c_int64_t, 'integer scalars')
  call check(l .and. .not. l2 .and. logical(lb), 'logical scalars')
  call check(title == 'heat 2-D, run #7', 'string: "' // title // '"')
  call check(back_size == 7, 'bytes size')
  call check(all(blob_back(1:7) == blob(1:7)) .and. all(blob_back(8:) == 0), 'bytes')
  call check(lr%missing == 0 .and. lr%skipped == 0, 'load result')
  call cairn_state_free(st)

  ! ---- partial load and capacity errors, the same on every rank --------------
  call cairn_load_options_create(lo)
  call cairn_load_options_set(lo, partial=.true., staging_bytes=4096_c_int64_t)
  call cairn_state_create(st)
  call cairn_state_add_scalar(st, 'i8', i8)
  call cairn_state_add_scalar(st, 'extra', extra)
  call cairn_load(st, path, MPI_COMM_WORLD, lo, lr, ierr)
  call check_ok(ierr, 'partial load')
  call check(lr%missing == 1 .and. lr%skipped == 9, 'partial load result')
  call cairn_state_missing(st, 1, name, ierr)
  call check_ok(ierr, 'cairn_state_missing')
  call check(name == 'extra', 'missing name ' // name)
  call cairn_state_skipped(st, 1, name)
  call check(name == 'blob', 'first skipped name ' // name)
  call cairn_state_skipped(st, 10, name, ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'index 9 is out of range', 'skipped out of range')
  call cairn_state_free(st)

  call cairn_state_create(st)
  call cairn_state_add_string(st, 'title', small)
  call cairn_load(st, path, MPI_COMM_WORLD, lo, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "string 'title': the checkpoint holds 16 characters, the buffer has room for 3", &
                 'string too long')
  call cairn_state_free(st)
  call cairn_state_create(st)
  call cairn_state_add_bytes(st, 'blob', blob(1:3), back_size)
  call cairn_load(st, path, MPI_COMM_WORLD, lo, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "bytes 'blob': the checkpoint holds 7 bytes, more than the capacity 3", &
                 'bytes too long')
  call cairn_state_free(st)

  ! ---- errors ------------------------------------------------------------------
  call cairn_state_create(st)
  call cairn_state_add_scalar(st, 'r8', r8)
  call cairn_load(st, test_dir() // '/nope', MPI_COMM_WORLD, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_NOT_FOUND, 'no checkpoint at', 'missing checkpoint')
  call check(cairn_last_error_code() == CAIRN_ERR_NOT_FOUND, 'cairn_last_error_code')
  call cairn_load(st, path, MPI_COMM_NULL, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'MPI_COMM_NULL', 'null communicator')
  call cairn_state_free(st)
  call cairn_state_create(st)
  call cairn_state_add_scalar(st, 'r8', r4)       ! f32 in the state, f64 stored
  call cairn_load(st, path, MPI_COMM_WORLD, lo, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_MISMATCH, "'r8'", 'dtype mismatch')
  call cairn_state_free(st)
  call cairn_clear_error()
  call check(cairn_last_error() == '' .and. cairn_last_error_code() == CAIRN_SUCCESS, 'cairn_clear_error')
  call cairn_save(st, path, MPI_COMM_WORLD, ierr=ierr)   ! st was freed
  call check_err(ierr, CAIRN_ERR_USAGE, 'the state is not created', 'freed state')

  ! ---- sections with strides: every other row, a column, a strided window --------
  a = reshape([(real(k, c_double), k = 1, 30)], [6, 5])
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'rows', a(1:6:2, 2:5), ierr=ierr)       ! replicated [3, 4]
  call check_ok(ierr, 'add rows')
  call cairn_state_add_array(st, 'column', a(:, 3))                       ! replicated [6]
  call cairn_save(st, test_dir() // '/sections', MPI_COMM_WORLD)
  call cairn_state_free(st)
  b = 0
  c = -1
  col = 0
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'rows', c(2:6:2, 0:2), [3_c_int64_t, 4_c_int64_t], [0_c_int64_t, 1_c_int64_t])
  call cairn_state_add_array(st, 'column', col)
  call cairn_load(st, test_dir() // '/sections', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'load sections')
  call cairn_state_free(st)
  do j = 0, 2
    do i = 0, 7
      if (i >= 2 .and. i <= 6 .and. mod(i, 2) == 0) then
        call check(c(i, j) == a(2 * ((i - 2) / 2) + 1, j + 3), 'strided window element')
      else
        call check(c(i, j) == -1, 'untouched element')
      end if
    end do
  end do
  call check(all(col == a(:, 3)), 'column')
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'rows', a(6:1:-2, :), ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'no reversed sections', 'reversed section')
  call cairn_state_add_array(st, 'rows', a(1:3, 1:4), [3_c_int64_t], ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the global shape has 1 extents, the array has rank 2', 'rank of global shape')
  call cairn_state_add_array(st, 'rows', a(1:3, 1:4), offsets=[1_c_int64_t, 0_c_int64_t], ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'offsets given without a global shape', 'offsets alone')
  call cairn_state_add_array(st, 'rows', a(1:3, 1:4), [3_c_int64_t, 4_c_int64_t], [1_c_int64_t, 0_c_int64_t], ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'lies outside the global shape [3, 4]', 'box outside')
  call cairn_state_free(st)

  ! ---- metadata ---------------------------------------------------------------
  call cairn_metadata_read(md, path, ierr)
  call check_ok(ierr, 'cairn_metadata_read')
  call cairn_metadata_info(md, format_version=fv, world_size=ws, num_entries=n)
  call check(fv >= 1 .and. ws == test_size .and. n == 10, 'cairn_metadata_info')
  call cairn_metadata_entry(md, 1, name, kind, dtype, ndim)
  call check(name == 'blob' .and. kind == CAIRN_KIND_BYTES .and. ndim == 1, 'entry 1')
  call cairn_metadata_entry_shape(md, 1, shp)
  call check(size(shp) == 1 .and. shp(1) == 7, 'shape of blob')
  call cairn_metadata_find(md, 'l', idx)
  call cairn_metadata_entry(md, idx, name, kind, dtype, ndim)
  call check(name == 'l' .and. kind == CAIRN_KIND_SCALAR .and. dtype == CAIRN_BOOL .and. ndim == 0, 'entry l')
  call cairn_metadata_entry_shape(md, idx, shp)
  call check(size(shp) == 0, 'shape of a scalar')
  call cairn_metadata_find(md, 'r4', idx)
  call cairn_metadata_entry(md, idx, dtype=dtype)
  call check(dtype == CAIRN_F32, 'dtype of r4')
  call cairn_metadata_find(md, 'nope', idx, ierr)
  call check_err(ierr, CAIRN_ERR_NOT_FOUND, "entry 'nope' is not in the checkpoint", 'find nope')
  call cairn_metadata_entry(md, 11, name, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'entry index 10 is out of range', 'entry 11')
  call cairn_metadata_free(md)
  call cairn_metadata_read(md, test_dir() // '/nope', ierr)
  call check_err(ierr, CAIRN_ERR_NOT_FOUND, 'no checkpoint', 'metadata of nothing')
  call cairn_metadata_free(md)

  call cairn_load_options_free(lo)
  call cairn_save_options_free(so)
  ! Main-program allocatables live until the end of the program; freed
  ! here so that LeakSanitizer (sanitized builds) sees nothing left.
  deallocate (shp, path)
  if (allocated(name)) deallocate (name)
  call test_finish('fortran_values')
end program test_values
