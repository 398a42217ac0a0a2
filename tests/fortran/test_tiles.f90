! Fortran module: several boxes of one array per rank. cairn_state_add_array
! called again with the same name adds a box: each rank holds its rows of an
! nx x ny field as two tiles (the left and right columns), each its own
! allocatable with ghost cells. Saved tiled in both layouts, loaded back as
! one box of rows per rank; saved as rows, loaded into tiles that overlap
! their neighbours by one column.
program test_tiles
  use mpi
  use cairn
  use test_support
  implicit none
  integer, parameter :: nx = 13, ny = 9, jm = 4   ! tile 1: columns 0..jm-1, tile 2: jm..ny-1
  type(cairn_state) :: st
  type(cairn_save_options) :: so
  double precision, allocatable, target :: left(:, :), right(:, :), rows(:, :)
  integer :: ni, i0, ierr, layout, bad, i, j
  character(len=:), allocatable :: path

  call test_init()
  ni = nx / test_size
  if (test_rank < mod(nx, test_size)) ni = ni + 1
  i0 = test_rank * (nx / test_size) + min(test_rank, mod(nx, test_size))

  do layout = CAIRN_LAYOUT_PER_RANK, CAIRN_LAYOUT_CONTAINER
    path = test_dir() // '/tiles'
    if (layout == CAIRN_LAYOUT_CONTAINER) path = path // '.h5'
    call cairn_save_options_create(so)
    call cairn_save_options_set(so, overwrite=.true., layout=layout, ierr=ierr)
    call check_ok(ierr, 'save options')

    ! Two tiles saved, one box of rows loaded.
    allocate (left(0:ni + 1, 0:jm + 1), right(0:ni + 1, jm - 1:ny))
    left = -1
    right = -1
    do j = 0, jm - 1
      do i = 1, ni
        left(i, j + 1) = value(i0 + i - 1, j)
      end do
    end do
    do j = jm, ny - 1
      do i = 1, ni
        right(i, j) = value(i0 + i - 1, j)
      end do
    end do
    call cairn_state_create(st)
    call cairn_state_add_array(st, 'field', left(1:ni, 1:jm), [nx, ny], [i0, 0], ierr)
    call check_ok(ierr, 'add the left tile')
    call cairn_state_add_array(st, 'field', right(1:ni, jm:ny - 1), [nx, ny], [i0, jm], ierr)
    call check_ok(ierr, 'add the right tile under the same name')
    call cairn_save(st, path, MPI_COMM_WORLD, so, ierr=ierr)
    call check_ok(ierr, 'save two tiles per rank')
    call cairn_state_free(st)

    allocate (rows(0:ni + 1, 0:ny + 1))
    rows = 3
    call cairn_state_create(st)
    call cairn_state_add_array(st, 'field', rows(1:ni, 1:ny), [nx, ny], [i0, 0], ierr)
    call check_ok(ierr, 'add the rows')
    call cairn_load(st, path, MPI_COMM_WORLD, ierr=ierr)
    call check_ok(ierr, 'load the tiled checkpoint into rows')
    call cairn_state_free(st)
    bad = 0
    do j = 0, ny + 1
      do i = 0, ni + 1
        if (i >= 1 .and. i <= ni .and. j >= 1 .and. j <= ny) then
          if (rows(i, j) /= value(i0 + i - 1, j - 1)) bad = bad + 1
        else if (rows(i, j) /= 3) then
          bad = bad + 1
        end if
      end do
    end do
    call check(bad == 0, 'tiles loaded as rows: interior right, ghosts untouched')

    ! Rows saved, overlapping tiles loaded (columns 0..jm and jm-1..ny-1).
    call cairn_state_create(st)
    call cairn_state_add_array(st, 'field', rows(1:ni, 1:ny), [nx, ny], [i0, 0], ierr)
    call cairn_save(st, path, MPI_COMM_WORLD, so, ierr=ierr)
    call check_ok(ierr, 'save rows')
    call cairn_state_free(st)
    left = -1
    right = -1
    call cairn_state_create(st)
    call cairn_state_add_array(st, 'field', left(1:ni, 1:jm + 1), [nx, ny], [i0, 0], ierr)
    call cairn_state_add_array(st, 'field', right(1:ni, jm - 1:ny - 1), [nx, ny], [i0, jm - 1], ierr)
    call check_ok(ierr, 'add two overlapping tiles')
    call cairn_load(st, path, MPI_COMM_WORLD, ierr=ierr)
    call check_ok(ierr, 'load rows into overlapping tiles')
    call cairn_state_free(st)
    bad = 0
    do j = 0, jm
      do i = 1, ni
        if (left(i, j + 1) /= value(i0 + i - 1, j)) bad = bad + 1
      end do
    end do
    do j = jm - 1, ny - 1
      do i = 1, ni
        if (right(i, j) /= value(i0 + i - 1, j)) bad = bad + 1
      end do
    end do
    if (left(0, 1) /= -1 .or. right(ni + 1, ny - 1) /= -1) bad = bad + 1
    call check(bad == 0, 'rows loaded into overlapping tiles')

    deallocate (left, right, rows)
    call cairn_save_options_free(so)
  end do

  call test_finish('fortran_tiles')

contains

  double precision function value(i, j)
    integer, intent(in) :: i, j
    value = 1000.0d0 * i + j
  end function value

end program test_tiles
