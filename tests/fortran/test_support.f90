! Helpers of the Fortran tests: checks that abort every rank on failure, the
! per-test working directory (CAIRN_TEST_DIR, set by CTest) and a block
! distribution. Uses the classic `mpi` module, so it works with either.
module test_support
  use, intrinsic :: iso_c_binding, only: c_int64_t
  use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
  use mpi
  use cairn, only: cairn_last_error, cairn_error_name, CAIRN_SUCCESS
  implicit none
  private
  public :: test_init, test_finish, check, check_ok, check_err, test_dir, itoa, block, test_rank, test_size
  public :: write_text_file

  integer, save :: test_rank = 0, test_size = 1, checks = 0
  character(len=:), allocatable, save :: dir

contains

  !> MPI_Init, or with thread_multiple = .true. MPI_Init_thread asking for
  !> (and requiring) MPI_THREAD_MULTIPLE; then the test's directory.
  subroutine test_init(thread_multiple)
    logical, intent(in), optional :: thread_multiple
    integer :: ierr, n, st, provided
    character(len=4096) :: env
    provided = MPI_THREAD_SINGLE
    if (present(thread_multiple)) then
      if (thread_multiple) then
        call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided, ierr)
        call MPI_Comm_rank(MPI_COMM_WORLD, test_rank, ierr)
        if (provided < MPI_THREAD_MULTIPLE) call fail('MPI_Init_thread did not provide MPI_THREAD_MULTIPLE')
      else
        call MPI_Init(ierr)
      end if
    else
      call MPI_Init(ierr)
    end if
    call MPI_Comm_rank(MPI_COMM_WORLD, test_rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, test_size, ierr)
    call get_environment_variable('CAIRN_TEST_DIR', env, n, st)
    if (st /= 0 .or. n == 0) env = 'cairn_fortran_test_tmp'
    dir = trim(env)
    if (test_rank == 0) call execute_command_line('rm -rf "' // dir // '" && mkdir -p "' // dir // '"', exitstat=st)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end subroutine test_init

  function test_dir() result(d)
    character(len=:), allocatable :: d
    d = dir
  end function test_dir

  subroutine test_finish(name)
    character(len=*), intent(in) :: name
    integer :: total, ierr
    call MPI_Reduce(checks, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (test_rank == 0) write (output_unit, '(a, ": ", i0, " checks passed on ", i0, " ranks")') name, total, test_size
    call MPI_Finalize(ierr)
  end subroutine test_finish

  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: ierr
    write (error_unit, '("rank ", i0, ": FAILED: ", a)') test_rank, what
    flush (error_unit)
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine fail

  !> A condition that must hold.
  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. cond) call fail(what)
  end subroutine check

  !> A Cairn call that must have succeeded.
  subroutine check_ok(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (ierr /= CAIRN_SUCCESS) call fail(what // ': ' // cairn_error_name(ierr) // ': ' // cairn_last_error())
  end subroutine check_ok

  !> A Cairn call that must have failed with `code` and a message holding `text`.
  subroutine check_err(ierr, code, text, what)
    integer, intent(in) :: ierr, code
    character(len=*), intent(in) :: text, what
    checks = checks + 1
    if (ierr /= code) call fail(what // ': got ' // cairn_error_name(ierr) // ', expected ' // &
                                cairn_error_name(code) // ' (' // cairn_last_error() // ')')
    if (index(cairn_last_error(), text) == 0) &
      call fail(what // ': message "' // cairn_last_error() // '" does not contain "' // text // '"')
  end subroutine check_err

  !> Rank 0 writes a small text file at `path` (e.g. to put a regular file
  !> where a directory is expected); every rank returns after it exists.
  subroutine write_text_file(path)
    character(len=*), intent(in) :: path
    integer :: u, ierr
    if (test_rank == 0) then
      open (newunit=u, file=path, status='replace', action='write')
      write (u, '(a)') 'not a directory'
      close (u)
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end subroutine write_text_file

  function itoa(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    character(len=32) :: buf
    write (buf, '(i0)') i
    s = trim(buf)
  end function itoa

  !> Block distribution of n cells over p parts: 0-based offset and size of part c.
  subroutine block(n, p, c, offset, size)
    integer(c_int64_t), intent(in) :: n
    integer, intent(in) :: p, c
    integer(c_int64_t), intent(out) :: offset, size
    integer(c_int64_t) :: base, rem
    base = n / p
    rem = mod(n, int(p, c_int64_t))
    size = base
    if (c < rem) size = size + 1
    offset = c * base + min(int(c, c_int64_t), rem)
  end subroutine block

end module test_support
