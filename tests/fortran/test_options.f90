! Fortran module: the save and load options beyond the basics. The layout
! chosen explicitly (a container under a name without ".h5", a per-rank
! directory under one with it); checksums (a flipped bit fails a verified
! load naming the array, a load without verification returns the damaged
! value); cooperative reads (a whole-array load on every rank reads the
! array once in all, the plain one once per rank); the container settings (hints, file locking, independent
! transfers, collective metadata, metadata cache) and the per-rank hints in
! round trips; invalid values refused by name; progress callbacks (the phases of a save and a
! load through the `user` pointer, and a cancelled save); cairn_verify.
module options_progress
  use, intrinsic :: iso_c_binding
  implicit none
  private
  !> What the callback saw, by phase (0-based phases at index phase + 1).
  type, bind(C), public :: seen_t
    integer(c_int) :: calls(8) = 0
    integer(c_int64_t) :: last_done(8) = 0, total(8) = 0
    integer(c_int) :: cancel_in = -1 ! return 3 in this phase
  end type seen_t
  public :: record
contains
  function record(phase, done, total, user) bind(C) result(rc)
    integer(c_int), value :: phase
    integer(c_int64_t), value :: done, total
    type(c_ptr), value :: user
    integer(c_int) :: rc
    type(seen_t), pointer :: s
    call c_f_pointer(user, s)
    s%calls(phase + 1) = s%calls(phase + 1) + 1
    s%last_done(phase + 1) = done
    s%total(phase + 1) = total
    rc = 0
    if (phase == s%cancel_in) rc = 3
  end function record
end module options_progress

program test_options
  use, intrinsic :: iso_c_binding
  use mpi
  use cairn
  use test_support
  use options_progress
  implicit none
  integer(c_int64_t), parameter :: n = 8192 ! doubles per rank
  type(seen_t), target :: seen
  type(cairn_verify_result) :: vr
  type(cairn_state) :: st, back_st
  type(cairn_save_options) :: so
  type(cairn_load_options) :: lo
  real(c_double), target :: x(n), back(n)
  real(c_double), allocatable, target :: whole(:)
  type(cairn_state) :: whole_st
  type(cairn_load_result) :: lr
  integer(c_int64_t) :: sums(2), plain_read
  integer :: coop
  integer(c_int64_t) :: i, off
  integer :: ierr, wrong
  logical :: there
  character(len=:), allocatable :: dir

  call test_init()
  dir = test_dir()
  off = n * test_rank
  x = [(0.5d0 * (off + i - 1) + 7.0d0, i = 1, n)]
  call cairn_state_create(st)
  call cairn_state_add_array(st, 'x', x, [n * test_size], [off])
  call cairn_state_create(back_st)
  call cairn_state_add_array(back_st, 'x', back, [n * test_size], [off])
  call cairn_save_options_create(so)
  call cairn_load_options_create(lo)

  ! ---- layouts ----------------------------------------------------------------
  call cairn_save_options_set(so, layout=CAIRN_LAYOUT_CONTAINER, ierr=ierr)
  call check_ok(ierr, 'layout container')
  call cairn_save(st, dir // '/opt_container', MPI_COMM_WORLD, so, ierr=ierr)
  call check_ok(ierr, 'save as a container')
  inquire (file=dir // '/opt_container/metadata.h5', exist=there)
  call check(.not. there, 'a container is one file, not a directory')
  call cairn_load_options_set(lo, layout=CAIRN_LAYOUT_CONTAINER)
  back = -1
  call cairn_load(back_st, dir // '/opt_container', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'load the container')
  call check(all(back == x), 'container round trip')
  call cairn_load_options_set(lo, layout=CAIRN_LAYOUT_PER_RANK)
  call cairn_load(back_st, dir // '/opt_container', MPI_COMM_WORLD, lo, ierr=ierr)
  call check(ierr /= CAIRN_SUCCESS, 'a container read as per-rank is refused')

  call cairn_save_options_set(so, layout=CAIRN_LAYOUT_PER_RANK)
  call cairn_save(st, dir // '/opt_rank.h5', MPI_COMM_WORLD, so, ierr=ierr)
  call check_ok(ierr, 'save per rank under .h5')
  inquire (file=dir // '/opt_rank.h5/metadata.h5', exist=there)
  call check(there, 'per-rank: a directory with metadata.h5')
  call cairn_load_options_set(lo, layout=CAIRN_LAYOUT_AUTOMATIC)
  back = -1
  call cairn_load(back_st, dir // '/opt_rank.h5', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'load per rank, automatic')
  call check(all(back == x), 'per-rank round trip')

  ! ---- cooperative reads ----------------------------------------------------------
  allocate (whole(n * test_size))
  call cairn_state_create(whole_st)
  call cairn_state_add_array(whole_st, 'x', whole, [n * test_size], [0_c_int64_t])
  plain_read = 0
  do coop = 0, 1
    call cairn_load_options_set(lo, cooperative=(coop == 1), ierr=ierr)
    call check_ok(ierr, 'cooperative')
    whole = -1
    call cairn_load(whole_st, dir // '/opt_rank.h5', MPI_COMM_WORLD, lo, lr, ierr)
    call check_ok(ierr, 'whole-array load, cooperative ' // itoa(coop))
    call check(all(whole == [(0.5d0 * (i - 1) + 7.0d0, i = 1, n * test_size)]), 'whole-array values')
    sums = [lr%bytes_read, lr%bytes_received]
    call MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (coop == 0) then
      plain_read = sums(1)
      call check(sums(1) == 8 * n * test_size * test_size, 'plain: every rank reads the whole array')
      call check(sums(2) == 0, 'plain: nothing received')
    else
      call check(sums(1) == 8 * n * test_size, 'cooperative: the array read once in all')
      call check(sums(2) == 8 * n * test_size * (test_size - 1), 'cooperative: the rest received')
      if (test_size > 1) call check(sums(1) < plain_read, 'cooperative reads less')
    end if
  end do
  call cairn_load_options_set(lo, cooperative=.false.)
  call cairn_state_free(whole_st)
  deallocate (whole)

  ! ---- checksums ----------------------------------------------------------------
  call cairn_save_options_set(so, checksum_block=4096_c_int64_t, ierr=ierr)
  call check_ok(ierr, 'checksum_block')
  call cairn_save(st, dir // '/opt_sum', MPI_COMM_WORLD, so)
  call flip_middle(dir // '/opt_sum/__0_0.distcp')
  call cairn_load(back_st, dir // '/opt_sum', MPI_COMM_WORLD, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_INTEGRITY, "checksum mismatch in 'x'", 'verified load of a flipped bit')
  call cairn_load_options_set(lo, verify_checksums=.false., ierr=ierr)
  call check_ok(ierr, 'verify_checksums')
  back = -1
  call cairn_load(back_st, dir // '/opt_sum', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'unverified load')
  wrong = count(back /= x)
  call MPI_Allreduce(MPI_IN_PLACE, wrong, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(wrong == 1, 'unverified load: the one damaged value')
  call cairn_load_options_set(lo, verify_checksums=.true.)

  ! ---- container settings ------------------------------------------------------------
  call cairn_save_options_set(so, layout=CAIRN_LAYOUT_AUTOMATIC, async_staging=CAIRN_ASYNC_STAGING_BOUNDED, &
                              container_file_locking=CAIRN_FILE_LOCKING_OFF, &
                              container_independent_below=0_c_int64_t, container_collective_metadata=.false., &
                              container_metadata_cache_bytes=8388608_c_int64_t, ierr=ierr)
  call check_ok(ierr, 'container settings (save)')
  call cairn_save_options_set_container_hint(so, 'romio_cb_write', 'enable', ierr)
  call check_ok(ierr, 'hint')
  call cairn_save_options_set_container_hint(so, 'cairn_unknown_hint  ', '1  ', ierr) ! trailing blanks dropped
  call check_ok(ierr, 'unknown hint')
  call cairn_save_options_set_container_hint(so, 'romio_cb_write', ierr=ierr)
  call check_ok(ierr, 'hint removed')
  call cairn_load_options_set(lo, container_file_locking=CAIRN_FILE_LOCKING_OFF, &
                              container_independent_below=0_c_int64_t, container_collective_metadata=.false., &
                              container_metadata_cache_bytes=8388608_c_int64_t, ierr=ierr)
  call check_ok(ierr, 'container settings (load)')
  call cairn_load_options_set_container_hint(lo, 'romio_cb_read', 'enable', ierr)
  call check_ok(ierr, 'load hint')
  call tuned_round_trip('opt_tuned.h5', 'tuned container')

  ! ---- per-rank hints --------------------------------------------------------------------
  call cairn_save_options_set(so, layout=CAIRN_LAYOUT_PER_RANK)
  call cairn_save_options_set_per_rank_hint(so, 'cb_buffer_size ', '2097152 ', ierr) ! trailing blanks dropped
  call check_ok(ierr, 'per-rank hint')
  call cairn_save_options_set_per_rank_hint(so, 'cairn_unknown_hint', ierr=ierr)     ! nothing to remove
  call check_ok(ierr, 'per-rank hint removed')
  call cairn_load_options_set_per_rank_hint(lo, 'romio_ds_read', 'disable', ierr)
  call check_ok(ierr, 'per-rank load hint')
  call tuned_round_trip('opt_tuned_per_rank', 'tuned per-rank')
  call cairn_save_options_set_per_rank_hint(so, 'cb_buffer_size', ierr=ierr)
  call check_ok(ierr, 'per-rank hint removed again')

  ! ---- progress callbacks ---------------------------------------------------------------
  call cairn_save_options_set(so, layout=CAIRN_LAYOUT_PER_RANK, overwrite=.true.)
  seen = seen_t()
  call cairn_save_options_set_progress(so, record, c_loc(seen), ierr)
  call check_ok(ierr, 'save progress')
  call cairn_save(st, dir // '/opt_progress', MPI_COMM_WORLD, so, ierr=ierr)
  call check_ok(ierr, 'save with progress')
  call check(all(seen%calls(CAIRN_PHASE_PLAN + 1:CAIRN_PHASE_COMMIT + 1) >= 2), 'save: every phase begins and ends')
  call check(seen%total(CAIRN_PHASE_WRITE + 1) == 8 * n, 'save: this rank writes its bytes')
  call check(seen%last_done(CAIRN_PHASE_WRITE + 1) == 8 * n, 'save: write done = total')
  call check(seen%calls(CAIRN_PHASE_READ + 1) == 0, 'save: no read phase')
  seen = seen_t()
  call cairn_load_options_set_progress(lo, record, c_loc(seen), ierr)
  call check_ok(ierr, 'load progress')
  back = -1
  call cairn_load(back_st, dir // '/opt_progress', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'load with progress')
  call check(all(back == x), 'load with progress: values')
  call check(seen%last_done(CAIRN_PHASE_READ + 1) == 8 * n, 'load: read done = total')
  ! Cancelled by the last rank as the write begins: refused on every rank,
  ! the checkpoint keeps its values.
  seen = seen_t()
  if (test_rank == test_size - 1) seen%cancel_in = CAIRN_PHASE_WRITE
  x = -x
  call cairn_save(st, dir // '/opt_progress', MPI_COMM_WORLD, so, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_OTHER, "progress callback returned 3 in phase 'write'", 'cancelled save')
  x = -x
  call cairn_load_options_set_progress(lo, ierr=ierr) ! none
  call check_ok(ierr, 'progress removed')
  back = -1
  call cairn_load(back_st, dir // '/opt_progress', MPI_COMM_WORLD, lo, ierr=ierr)
  call check_ok(ierr, 'load after the cancelled save')
  call check(all(back == x), 'the cancelled save left the checkpoint as it was')
  call cairn_save_options_set_progress(so)

  ! ---- verify --------------------------------------------------------------------------
  call cairn_verify(dir // '/opt_tuned.h5', MPI_COMM_WORLD, result=vr, ierr=ierr)
  call check_ok(ierr, 'verify an intact container')
  call check(vr%problems == 0 .and. vr%checksums == 1 .and. vr%bytes == 8 * n * test_size, 'verify: intact')
  call cairn_verify(dir // '/opt_sum', MPI_COMM_WORLD, lo, vr, ierr)
  call check_err(ierr, CAIRN_ERR_INTEGRITY, "1 damaged chunk:", 'verify the flipped bit')
  call check(index(cairn_last_error(), "'x'") > 0, 'verify names the array')
  call check(vr%problems == 1, 'verify: one damaged chunk')

  ! ---- refused by name ------------------------------------------------------------------
  call cairn_save_options_set(so, layout=5, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid layout 5', 'layout 5')
  call cairn_load_options_set(lo, layout=-1, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid layout -1', 'layout -1')
  call cairn_save_options_set(so, async_staging=4, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid async staging 4', 'async staging 4')
  call cairn_load_options_set(lo, container_file_locking=9, ierr=ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid file locking 9', 'file locking 9')
  call cairn_save_options_set_container_hint(so, '   ', '1', ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the key is NULL or empty', 'blank hint key')
  call cairn_load_options_set_container_hint(lo, repeat('k', 300), '1', ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "MPI-IO hint 'kkk", 'long hint key')
  call cairn_save_options_set_per_rank_hint(so, '', '1', ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'the key is NULL or empty', 'empty per-rank hint key')
  call cairn_load_options_set_per_rank_hint(lo, repeat('k', 300), '1', ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, "MPI-IO hint 'kkk", 'long per-rank hint key')
  call cairn_set_log_level(CAIRN_LOG_OFF, ierr)
  call check_ok(ierr, 'log level off')
  call cairn_set_log_level(5, ierr)
  call check_err(ierr, CAIRN_ERR_USAGE, 'invalid log level 5', 'log level 5')

  call cairn_save_options_free(so)
  call cairn_load_options_free(lo)
  call cairn_state_free(st)
  call cairn_state_free(back_st)
  ! Main-program allocatables live until the end of the program; freed
  ! here so that LeakSanitizer (scripts/sanitize.sh) sees no leak.
  deallocate (dir)
  call test_finish('fortran_options')

contains

  ! Saves `st` as `name` in the test directory with `so`, loads it into
  ! `back_st` with `lo`, and checks every value.
  subroutine tuned_round_trip(name, what)
    character(len=*), intent(in) :: name, what
    integer :: ierr2
    call cairn_save(st, dir // '/' // name, MPI_COMM_WORLD, so, ierr=ierr2)
    call check_ok(ierr2, what // ' save')
    back = -1
    call cairn_load(back_st, dir // '/' // name, MPI_COMM_WORLD, lo, ierr=ierr2)
    call check_ok(ierr2, what // ' load')
    call check(all(back == x), what // ' round trip')
  end subroutine tuned_round_trip

  ! Rank 0 XORs the byte in the middle of `file` with 16; every rank returns after.
  subroutine flip_middle(file)
    character(len=*), intent(in) :: file
    integer :: u, ierr2
    integer(c_int64_t) :: sz
    integer(c_int8_t) :: b
    if (test_rank == 0) then
      open (newunit=u, file=file, access='stream', form='unformatted', action='readwrite', status='old')
      inquire (unit=u, size=sz)
      read (u, pos=sz / 2 + 1) b
      b = ieor(b, 16_c_int8_t)
      write (u, pos=sz / 2 + 1) b
      close (u)
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr2)
  end subroutine flip_middle

end program test_options
