! heat2d_f: the Fortran port of Cairn's heat2d example (examples/heat2d).
!
! The same explicit 2-D heat equation on an nx x ny grid of doubles, the same
! 2-D Cartesian decomposition with one ghost layer, the same command line,
! output and digest, and the same checkpoint entries (`temperature`, f64
! [nx, ny]; `step`, i64), so checkpoints are interchangeable with the C++
! program: one written by either restarts in the other, on any number of
! ranks, and ends with the digest of the straight run.
!
!   mpiexec -n 4 heat2d_f --nx 96 --ny 80 --steps 100 --checkpoint ckpt
!   mpiexec -n 3 heat2d   --nx 96 --ny 80 --steps 200 --restart ckpt
!
! With --checkpoint-every K --checkpoint-dir DIR it saves every K steps
! through a checkpoint manager (keeping the last 2), --resume DIR restarts
! from the newest step; --local-dir DIR keeps each step on node-local
! storage ("%n": the node's index), with --redundancy partner or xor[:k],
! draining every --flush-every K-th step into the checkpoint directory:
!
!   mpiexec -n 4 heat2d_f --nx 96 --ny 80 --steps 200 --checkpoint-every 20 --resume run \
!           --local-dir /dev/shm/heat2d --redundancy partner --flush-every 5
!
! The field is T(0:lnx+1, 0:lny+1): T(li, lj) is global cell (i, j) =
! (i0 + li - 1, j0 + lj - 1), the C++ program's T[i][j]. Cairn's Fortran
! module maps A(i1, i2) to global element [i1, i2] (strides take care of the
! column-major layout), so the checkpoint holds the interior section
! T(1:lnx, 1:lny) at 0-based offsets [i0, j0] of the global shape [nx, ny].
! Compiled with -ffp-contract=off; the parentheses fix the order of the sums.
program heat2d_f
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit
  use mpi_f08
  use cairn
  implicit none

  integer, parameter :: exit_ok = 0, exit_error = 1, exit_usage = 2
  character(len=*), parameter :: usage_text = &
    'usage: heat2d_f --nx NX --ny NY --steps S [--checkpoint PATH] [--restart PATH]' // new_line('a') // &
    '                [--files per-rank|per-node|N]' // new_line('a') // &
    '                [--checkpoint-every K [--checkpoint-dir DIR]] [--resume DIR]' // new_line('a') // &
    '                [--local-dir DIR [--redundancy none|partner|xor[:k]] [--flush-every K]]' // new_line('a') // &
    '  --nx NX, --ny NY   global grid size (rows, columns), at least 1 each' // new_line('a') // &
    '  --steps S          run until global step S (S >= 0)' // new_line('a') // &
    '  --checkpoint PATH  save the field and the step counter to PATH at the end' // new_line('a') // &
    '  --restart PATH     load the field and the step counter from PATH first' // new_line('a') // &
    '  --files F          data files of the checkpoint: per-rank (one per rank, the' // new_line('a') // &
    '                     default), per-node (one per node) or N files in all' // new_line('a') // &
    '  --checkpoint-every K  save every K steps into DIR through a checkpoint' // new_line('a') // &
    '                     manager (DIR/step_<N>, DIR/LATEST; the last 2 are kept)' // new_line('a') // &
    '  --checkpoint-dir DIR  root of the periodic checkpoints (default: --resume DIR)' // new_line('a') // &
    '  --resume DIR       start from the latest committed checkpoint in DIR (from' // new_line('a') // &
    '                     step 0 when there is none)' // new_line('a') // &
    '  --local-dir DIR    periodic checkpoints go to node-local storage DIR ("%n":' // new_line('a') // &
    '                     the node''s index), every --flush-every K-th of them also' // new_line('a') // &
    '                     drained into the checkpoint directory; --resume with the' // new_line('a') // &
    '                     same options takes the newest step of either' // new_line('a') // &
    '  --redundancy R     of node-local steps: none (default), partner (each node''s' // new_line('a') // &
    '                     files also on the next node) or xor[:k] (parity over' // new_line('a') // &
    '                     groups of k nodes, default 4)' // new_line('a') // &
    '  --flush-every K    drain every K-th node-local step into the checkpoint' // new_line('a') // &
    '                     directory (default 10; 0: none but the last, which is' // new_line('a') // &
    '                     drained at the end of the run)' // new_line('a') // &
    '  --ranks-per-node K (testing) every K consecutive ranks form a node' // new_line('a') // &
    'Prints `digest <16 hex digits>` on rank 0 as its last line.'

  interface
    subroutine heat2d_f_digest(t, ld, lnx, lny, i0, j0, ny, comm, hex) bind(C, name="heat2d_f_digest")
      import :: c_double, c_int64_t, c_int, c_char
      real(c_double), intent(in) :: t(*)
      integer(c_int64_t), value :: ld, lnx, lny, i0, j0, ny
      integer(c_int), value :: comm
      character(kind=c_char), intent(out) :: hex(16)
    end subroutine heat2d_f_digest
  end interface

  ! command line
  integer(c_int64_t) :: nx = 0, ny = 0, steps = -1
  character(len=:), allocatable :: checkpoint, restart
  logical :: help = .false.
  integer :: data_files = CAIRN_FILES_PER_RANK
  integer(c_int64_t) :: checkpoint_every = 0  ! 0: no periodic checkpoints
  character(len=:), allocatable :: checkpoint_dir, resume, local_dir, redundancy
  integer :: flush_every = 10, ranks_per_node = 0
  ! decomposition
  type(MPI_Comm) :: cart
  type(MPI_Datatype) :: row
  integer :: world_rank, world_size, rank, nranks, dims(2), coords(2), up, down, left, right
  integer(c_int64_t) :: i0, j0, lnx, lny
  ! state
  real(c_double), allocatable, target :: t(:, :), next(:, :), tmp(:, :)
  integer(c_int64_t), target :: step
  integer(c_int64_t) :: first          ! the step this run started from
  type(cairn_manager) :: manager       ! of the periodic checkpoints
  integer :: rc

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, world_rank)
  call MPI_Comm_size(MPI_COMM_WORLD, world_size)
  rc = run()
  flush (output_unit)
  ! Everything allocated is released before the end (LeakSanitizer).
  if (allocated(t)) deallocate (t)
  if (allocated(next)) deallocate (next)
  if (allocated(tmp)) deallocate (tmp)
  if (allocated(checkpoint)) deallocate (checkpoint)
  if (allocated(restart)) deallocate (restart)
  if (allocated(checkpoint_dir)) deallocate (checkpoint_dir)
  if (allocated(resume)) deallocate (resume)
  if (allocated(local_dir)) deallocate (local_dir)
  if (allocated(redundancy)) deallocate (redundancy)
  call MPI_Finalize()
  select case (rc)
  case (exit_ok)
  case (exit_usage)
    stop 2
  case default
    stop 1
  end select

contains

  integer function run()
    character(len=:), allocatable :: bad
    logical :: periods(2)

    ! Every rank parses the same argv, so every rank takes the same branch.
    checkpoint = ''
    restart = ''
    checkpoint_dir = ''
    resume = ''
    local_dir = ''
    redundancy = 'none'
    bad = parse_args()
    if (help) then
      if (world_rank == 0) write (output_unit, '(a)') usage_text
      run = exit_ok
      return
    end if
    if (len(bad) > 0) then
      if (world_rank == 0) write (error_unit, '(a)') 'heat2d_f: ' // bad // new_line('a') // usage_text
      run = exit_usage
      return
    end if

    dims = 0
    call MPI_Dims_create(world_size, 2, dims)
    if (dims(1) > nx .or. dims(2) > ny) then
      if (world_rank == 0) write (error_unit, '(a)') 'heat2d_f: a ' // itoa(nx) // ' x ' // itoa(ny) // &
        ' grid is too small for a ' // itoa(int(dims(1), c_int64_t)) // ' x ' // &
        itoa(int(dims(2), c_int64_t)) // ' process grid' // new_line('a') // usage_text
      run = exit_usage
      return
    end if
    periods = .false.
    call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart)
    call MPI_Comm_rank(cart, rank)
    call MPI_Comm_size(cart, nranks)
    call MPI_Cart_coords(cart, rank, 2, coords)
    call MPI_Cart_shift(cart, 0, 1, up, down)
    call MPI_Cart_shift(cart, 1, 1, left, right)
    call block(nx, dims(1), coords(1), i0, lnx)
    call block(ny, dims(2), coords(2), j0, lny)
    ! A row (fixed i) of the interior is strided in Fortran: lny elements lnx+2 apart.
    call MPI_Type_vector(int(lny), 1, int(lnx + 2), MPI_DOUBLE_PRECISION, row)
    call MPI_Type_commit(row)

    allocate (t(0:lnx + 1, 0:lny + 1), next(0:lnx + 1, 0:lny + 1))
    t = 0
    next = 0
    step = 0

    if (rank == 0) write (output_unit, '(a)') 'heat2d_f: ' // itoa(nx) // ' x ' // itoa(ny) // ' grid, ' // &
      itoa(int(nranks, c_int64_t)) // ' ranks (' // itoa(int(dims(1), c_int64_t)) // ' x ' // &
      itoa(int(dims(2), c_int64_t)) // '), until step ' // itoa(steps)

    run = simulate()

    call MPI_Type_free(row)
    call MPI_Comm_free(cart)
  end function run

  integer function simulate()
    type(cairn_state) :: state
    type(cairn_save_options) :: options
    type(cairn_save_result) :: saved
    character(kind=c_char) :: hex(16)
    double precision :: t0, elapsed
    integer :: ierr, k

    simulate = exit_error
    if (len(resume) > 0) then
      if (.not. resume_latest()) return
    else if (len(restart) > 0) then
      call make_state(state)
      call cairn_load(state, restart, cart, ierr=ierr)
      call cairn_state_free(state)
      if (ierr /= CAIRN_SUCCESS) then
        ! Collective Cairn calls fail with the same message on every rank.
        if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
        return
      end if
      if (step < 0 .or. step > steps) then
        if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: checkpoint ' // restart // ' is at step ' // &
          itoa(step) // ', beyond --steps ' // itoa(steps)
        return
      end if
      if (rank == 0) write (output_unit, '(a)') 'restarted from ' // restart // ' at step ' // itoa(step) // &
        ' on ' // itoa(int(nranks, c_int64_t)) // ' ranks'
    else
      call initialise()
    end if
    ! The border cells are copied, never recomputed: seed `next` with them.
    next = t

    ! Periodic checkpoints through a manager: every K steps after the first
    ! step of this run (never the step it resumed from).
    if (checkpoint_every > 0) then
      call cairn_save_options_create(options)
      call cairn_save_options_set(options, data_files=data_files)
      if (len(local_dir) > 0) then
        call cairn_manager_create(manager, manager_root(), cart, keep_last=2, save_options=options, &
                                  local_dir=local_dir, redundancy=redundancy, flush_every=flush_every, &
                                  ranks_per_node=ranks_per_node, ierr=ierr)
      else
        call cairn_manager_create(manager, manager_root(), cart, keep_last=2, save_options=options, ierr=ierr)
      end if
      call cairn_save_options_free(options)
      if (ierr /= CAIRN_SUCCESS) then
        if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
        return
      end if
    end if

    t0 = MPI_Wtime()
    first = step
    do while (step < steps)
      if (.not. periodic()) return
      call exchange_halo()
      call step_once()
      call move_alloc(t, tmp)
      call move_alloc(next, t)
      call move_alloc(tmp, next)
      step = step + 1
    end do
    elapsed = MPI_Wtime() - t0
    if (rank == 0) write (output_unit, '(a)') 'ran steps ' // itoa(first) // '..' // itoa(step) // ' in ' // &
      seconds(elapsed) // ' s'
    if (.not. periodic()) return
    if (checkpoint_every > 0) then
      if (.not. drain_and_wait()) return
    end if

    if (len(checkpoint) > 0) then
      call cairn_save_options_create(options)
      call cairn_save_options_set(options, overwrite=.true., data_files=data_files)
      call make_state(state)
      call cairn_save(state, checkpoint, cart, options, saved, ierr)
      call cairn_state_free(state)
      call cairn_save_options_free(options)
      if (ierr /= CAIRN_SUCCESS) then
        if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
        return
      end if
      if (rank == 0) write (output_unit, '(a)') 'checkpoint ' // checkpoint // ' written: ' // &
        itoa(saved%bytes_written) // ' bytes, ' // itoa(saved%entries) // ' entries, step ' // itoa(step) // &
        ', ' // seconds(saved%seconds) // ' s'
    end if

    call heat2d_f_digest(t, lnx + 2, lnx, lny, i0, j0, ny, int(cart%MPI_VAL, c_int), hex)
    if (rank == 0) then
      write (output_unit, '(a, 16a1)') 'digest ', (hex(k), k = 1, 16)
      flush (output_unit)
    end if
    simulate = exit_ok
  end function simulate

  ! Saves step `step` through the manager when it is due: every
  ! checkpoint_every steps, not the first step of this run. False (after
  ! printing the error on rank 0) when the save failed.
  logical function periodic()
    type(cairn_state) :: state
    type(cairn_save_result) :: saved
    integer :: ierr
    periodic = .true.
    if (checkpoint_every == 0 .or. step == first .or. mod(step, checkpoint_every) /= 0) return
    call make_state(state)
    call cairn_manager_save(manager, step, state, result=saved, ierr=ierr)
    call cairn_state_free(state)
    if (ierr /= CAIRN_SUCCESS) then
      if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
      periodic = .false.
      call cairn_manager_free(manager)
      return
    end if
    if (rank == 0) write (output_unit, '(a)') 'checkpoint of step ' // itoa(step) // ' committed: ' // &
      itoa(saved%bytes_written) // ' bytes, ' // seconds(saved%seconds) // ' s'
  end function periodic

  ! The end of a run with periodic checkpoints: with a node-local level, the
  ! newest node-local step also goes to the file system; then the manager
  ! settles (waits for the drain's commit) and is freed. False after
  ! printing the error on rank 0.
  logical function drain_and_wait()
    integer(c_int64_t) :: drained
    logical :: started
    integer :: ierr
    drain_and_wait = .false.
    ierr = CAIRN_SUCCESS
    if (len(local_dir) > 0) then
      call cairn_manager_flush(manager, drained, started, ierr)
      if (ierr == CAIRN_SUCCESS .and. started .and. rank == 0) &
        write (output_unit, '(a)') 'draining step ' // itoa(drained) // ' into ' // manager_root()
    end if
    if (ierr == CAIRN_SUCCESS) call cairn_manager_wait(manager, ierr=ierr)
    call cairn_manager_free(manager)
    if (ierr /= CAIRN_SUCCESS) then
      if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
      return
    end if
    drain_and_wait = .true.
  end function drain_and_wait

  ! The root of the periodic checkpoints.
  function manager_root() result(root)
    character(len=:), allocatable :: root
    root = checkpoint_dir
    if (len(root) == 0) root = resume
  end function manager_root

  ! --resume: the newest step of the manager in `resume` (node-local or in
  ! the directory), on whatever number of ranks it was written; none (a
  ! first run): from the beginning. False after printing the error on rank 0.
  logical function resume_latest()
    type(cairn_manager) :: from
    type(cairn_state) :: state
    integer(c_int64_t) :: found_step, moved
    logical :: found
    integer :: ierr, level, rebuilt
    resume_latest = .false.
    if (len(local_dir) > 0) then
      call cairn_manager_create(from, resume, cart, local_dir=local_dir, redundancy=redundancy, &
                                flush_every=flush_every, ranks_per_node=ranks_per_node, ierr=ierr)
    else
      call cairn_manager_create(from, resume, cart, ierr=ierr)
    end if
    level = CAIRN_LEVEL_NONE
    if (ierr == CAIRN_SUCCESS) then
      call make_state(state)
      call cairn_manager_restore_latest(from, state, found_step, found, ierr=ierr)
      call cairn_state_free(state)
      if (ierr == CAIRN_SUCCESS) &
        call cairn_manager_last_restore(from, level, rebuilt=rebuilt, bytes_moved=moved, ierr=ierr)
    end if
    call cairn_manager_free(from)
    if (ierr /= CAIRN_SUCCESS) then
      if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: ' // cairn_last_error()
      return
    end if
    if (.not. found) then
      call initialise()
      if (rank == 0) write (output_unit, '(a)') 'no committed checkpoint in ' // resume // ': starting from step 0'
    else
      if (step /= found_step .or. step > steps) then
        if (rank == 0) write (error_unit, '(a)') 'heat2d_f: error: the latest checkpoint in ' // resume // &
          ' is at step ' // itoa(step) // ', beyond --steps ' // itoa(steps)
        return
      end if
      if (level == CAIRN_LEVEL_NODE_LOCAL) then
        if (rank == 0) write (output_unit, '(a)') 'resumed from node-local storage ' // local_dir // &
          ' at step ' // itoa(step) // ' on ' // itoa(int(nranks, c_int64_t)) // ' ranks (' // &
          itoa(int(rebuilt, c_int64_t)) // ' files rebuilt, ' // itoa(moved) // ' bytes moved between nodes)'
      else
        if (rank == 0) write (output_unit, '(a)') 'resumed from ' // resume // '/' // step_name(step) // &
          ' at step ' // itoa(step) // ' on ' // itoa(int(nranks, c_int64_t)) // ' ranks'
      end if
    end if
    resume_latest = .true.
  end function resume_latest

  ! The state dict of the simulation: this rank's box of the field, seen
  ! through the interior section of the local array (the ghosts are neither
  ! saved nor overwritten), and the step counter.
  subroutine make_state(state)
    type(cairn_state), intent(out) :: state
    call cairn_state_create(state)
    call cairn_state_add_array(state, 'temperature', t(1:lnx, 1:lny), [nx, ny], [i0, j0])
    call cairn_state_add_scalar(state, 'step', step)
  end subroutine make_state

  ! ---- physics -------------------------------------------------------------

  subroutine initialise()
    integer(c_int64_t) :: li, lj, i, j
    do lj = 1, lny
      j = j0 + lj - 1
      do li = 1, lnx
        i = i0 + li - 1
        t(li, lj) = real(mod(i * 7 + j * 13, 101_c_int64_t), c_double) / 100.0_c_double
      end do
    end do
  end subroutine initialise

  ! Fills the ghost layer from the four neighbours (corners are not needed by
  ! the 5-point stencil), in the order of the C++ program.
  subroutine exchange_halo()
    integer :: n
    n = int(lnx)
    ! Rows are strided: first owned row up, last owned row down.
    call MPI_Sendrecv(t(1, 1), 1, row, up, 0, t(lnx + 1, 1), 1, row, down, 0, cart, MPI_STATUS_IGNORE)
    call MPI_Sendrecv(t(lnx, 1), 1, row, down, 1, t(0, 1), 1, row, up, 1, cart, MPI_STATUS_IGNORE)
    ! Columns are contiguous.
    call MPI_Sendrecv(t(1, 1), n, MPI_DOUBLE_PRECISION, left, 2, t(1, lny + 1), n, MPI_DOUBLE_PRECISION, right, 2, &
                      cart, MPI_STATUS_IGNORE)
    call MPI_Sendrecv(t(1, lny), n, MPI_DOUBLE_PRECISION, right, 3, t(1, 0), n, MPI_DOUBLE_PRECISION, left, 3, &
                      cart, MPI_STATUS_IGNORE)
  end subroutine exchange_halo

  ! One explicit step from `t` into `next`. Border cells of the global grid
  ! keep their value.
  subroutine step_once()
    integer(c_int64_t) :: li, lj, i, j
    real(c_double) :: tc, total, lap
    do lj = 1, lny
      j = j0 + lj - 1
      do li = 1, lnx
        i = i0 + li - 1
        tc = t(li, lj)
        if (i == 0 .or. i == nx - 1 .or. j == 0 .or. j == ny - 1) then
          next(li, lj) = tc
          cycle
        end if
        total = ((t(li - 1, lj) + t(li + 1, lj)) + t(li, lj - 1)) + t(li, lj + 1)
        lap = total - 4.0_c_double * tc
        next(li, lj) = tc + 0.1_c_double * lap
      end do
    end do
  end subroutine step_once

  ! ---- decomposition -------------------------------------------------------

  ! Block distribution of n cells over p parts: the first mod(n, p) parts get one extra.
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

  ! ---- command line --------------------------------------------------------

  ! Parses the command line; returns an error message, empty on success.
  function parse_args() result(bad)
    character(len=:), allocatable :: bad, arg, value
    integer :: k, n, eq
    integer(c_int64_t) :: v
    integer(c_int64_t), parameter :: max_extent = 2_c_int64_t**30
    logical :: have_nx, have_ny, have_steps

    bad = ''
    arg = ''
    value = ''
    have_nx = .false.
    have_ny = .false.
    have_steps = .false.
    n = command_argument_count()
    k = 0
    do while (k < n)
      k = k + 1
      arg = argument(k)
      if (arg == '-h' .or. arg == '--help') then
        help = .true.
        cycle
      end if
      eq = index(arg, '=')
      if (len(arg) >= 2 .and. eq > 0) then
        if (arg(1:2) /= '--') eq = 0
      end if
      if (eq > 0) then
        value = arg(eq + 1:)
        arg = arg(1:eq - 1)
      else if (arg == '--nx' .or. arg == '--ny' .or. arg == '--steps' .or. arg == '--checkpoint' .or. &
               arg == '--restart' .or. arg == '--files' .or. arg == '--checkpoint-every' .or. &
               arg == '--checkpoint-dir' .or. arg == '--resume' .or. arg == '--local-dir' .or. &
               arg == '--redundancy' .or. arg == '--flush-every' .or. arg == '--ranks-per-node') then
        if (k + 1 > n) then
          bad = 'missing value after ' // arg
          return
        end if
        k = k + 1
        value = argument(k)
      else
        bad = "unknown argument '" // arg // "'"
        return
      end if
      if (arg == '--nx' .or. arg == '--ny' .or. arg == '--steps') then
        if (.not. parse_int(value, v)) then
          bad = 'not an integer: ' // arg // " '" // value // "'"
          return
        end if
        if (arg == '--nx') then
          nx = v
          have_nx = .true.
        else if (arg == '--ny') then
          ny = v
          have_ny = .true.
        else
          steps = v
          have_steps = .true.
        end if
      else if (arg == '--checkpoint-every' .or. arg == '--flush-every' .or. arg == '--ranks-per-node') then
        if (.not. parse_int(value, v)) then
          bad = 'not an integer: ' // arg // " '" // value // "'"
          return
        end if
        if (arg == '--checkpoint-every') then
          if (v < 1) then
            bad = '--checkpoint-every must be at least 1'
            return
          end if
          checkpoint_every = v
        else if (v < 0 .or. v > 2_c_int64_t**30) then
          bad = arg // ' must be between 0 and 2^30'
          return
        else if (arg == '--flush-every') then
          flush_every = int(v)
        else
          ranks_per_node = int(v)
        end if
      else if (arg == '--redundancy') then
        redundancy = value   ! checked by the manager
      else if (arg == '--checkpoint-dir' .or. arg == '--resume' .or. arg == '--local-dir') then
        if (len(value) == 0) then
          bad = 'empty path for ' // arg
          return
        end if
        if (arg == '--checkpoint-dir') then
          checkpoint_dir = value
        else if (arg == '--resume') then
          resume = value
        else
          local_dir = value
        end if
      else if (arg == '--files') then
        if (value == 'per-rank') then
          data_files = CAIRN_FILES_PER_RANK
        else if (value == 'per-node') then
          data_files = CAIRN_FILES_PER_NODE
        else if (parse_int(value, v)) then
          if (v < 1 .or. v > huge(data_files)) then
            bad = "--files: expected per-rank, per-node or a number of files of at least 1, not '" // value // "'"
            return
          end if
          data_files = int(v)
        else
          bad = "--files: expected per-rank, per-node or a number of files of at least 1, not '" // value // "'"
          return
        end if
      else if (arg == '--checkpoint' .or. arg == '--restart') then
        if (len(value) == 0) then
          bad = 'empty path for ' // arg
          return
        end if
        if (arg == '--checkpoint') then
          checkpoint = value
        else
          restart = value
        end if
      else
        bad = "unknown argument '" // arg // "'"
        return
      end if
    end do
    if (help) return
    if (.not. (have_nx .and. have_ny .and. have_steps)) then
      bad = '--nx, --ny and --steps are required'
    else if (nx < 1 .or. ny < 1 .or. nx > max_extent .or. ny > max_extent) then
      bad = '--nx and --ny must be between 1 and 2^30'
    else if (steps < 0) then
      bad = '--steps must be >= 0'
    else if (len(restart) > 0 .and. len(resume) > 0) then
      bad = '--restart and --resume exclude each other'
    else if (checkpoint_every > 0 .and. len(checkpoint_dir) == 0 .and. len(resume) == 0) then
      bad = '--checkpoint-every needs --checkpoint-dir DIR (or --resume DIR)'
    else if (checkpoint_every == 0 .and. len(checkpoint_dir) > 0) then
      bad = '--checkpoint-dir needs --checkpoint-every K'
    else if (len(local_dir) > 0 .and. checkpoint_every == 0 .and. len(resume) == 0) then
      bad = '--local-dir needs --checkpoint-every K or --resume DIR'
    end if
  end function parse_args

  function argument(k) result(arg)
    integer, intent(in) :: k
    character(len=:), allocatable :: arg
    integer :: n
    n = 0
    call get_command_argument(k, length=n)
    allocate (character(len=n) :: arg)
    if (n > 0) call get_command_argument(k, arg)
  end function argument

  ! A decimal integer with an optional sign and nothing else.
  logical function parse_int(text, value)
    character(len=*), intent(in) :: text
    integer(c_int64_t), intent(out) :: value
    integer :: i, first, ios
    value = 0
    parse_int = .false.
    first = 1
    if (len(text) == 0) return
    if (text(1:1) == '-' .or. text(1:1) == '+') first = 2
    if (first > len(text) .or. len(text) - first + 1 > 18) return
    do i = first, len(text)
      if (text(i:i) < '0' .or. text(i:i) > '9') return
    end do
    read (text, *, iostat=ios) value
    parse_int = ios == 0
  end function parse_int

  ! The manager's name of a step: step_<N>, N of at least 8 digits.
  function step_name(i) result(s)
    integer(c_int64_t), intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buf
    if (i >= 0 .and. i < 100000000_c_int64_t) then
      write (buf, '(i8.8)') i
    else
      write (buf, '(i0)') i
    end if
    s = 'step_' // trim(buf)
  end function step_name

  function itoa(i) result(s)
    integer(c_int64_t), intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write (buf, '(i0)') i
    s = trim(buf)
  end function itoa

  ! Seconds with three decimals, as printf's %.3f.
  function seconds(x) result(s)
    double precision, intent(in) :: x
    character(len=:), allocatable :: s
    character(len=32) :: buf
    write (buf, '(f0.3)') x
    s = trim(adjustl(buf))
    if (s(1:1) == '.') s = '0' // s
  end function seconds

end program heat2d_f
