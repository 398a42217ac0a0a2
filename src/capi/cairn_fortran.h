/* Private: the C helpers behind the Fortran module `cairn` (fortran/). They
 * take Fortran strings as (pointer, length) without a NUL, communicators as
 * MPI_Fint, and arrays as the address of their first element plus the
 * address of the next element along each dimension, from which the element
 * strides of any (non-contiguous) Fortran array section follow. Not
 * installed: only the module is the Fortran interface. Conventions otherwise
 * as in <cairn/cairn.h>. */
#ifndef CAIRN_FORTRAN_SUPPORT_H
#define CAIRN_FORTRAN_SUPPORT_H

#include "cairn/cairn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Adds an array of `ndim` dimensions, in Fortran order = Cairn order:
 *  Fortran dimension k is Cairn dimension k-1. `shape` holds the extents of
 *  the Fortran array; `base` the address of its first element (NULL when it
 *  is empty); `next[d]` the address of the element one further along
 *  dimension d (ignored where shape[d] < 2). `global_len` = -1: no global
 *  shape given, the array is replicated (offsets must be absent too);
 *  `offsets_len` = -1: offsets all 0. `true_value` / `false_value` (both
 *  NULL, or both the address of a logical of `elem_size` bytes) select the
 *  conversion of a non-interoperable logical to Cairn's bool. */
int cairn_f_state_add_array(cairn_state_t* state, const char* name, size_t name_len, int dtype, int ndim,
                            const int64_t* shape, void* base, void* const* next, size_t elem_size,
                            const int64_t* global_shape, int global_len, const int64_t* offsets, int offsets_len,
                            const void* true_value, const void* false_value);

/** Adds an array in CUDA device memory (cairn_state_add_device_array) of
 *  `ndim` dimensions in Fortran order = Cairn order. `data` is the device
 *  address of its first element; `strides` its element strides
 *  (`strides_len` = -1: dense column-major, 1, shape[0], ...); global shape
 *  and offsets as for cairn_f_state_add_array. */
int cairn_f_state_add_device_array(cairn_state_t* state, const char* name, size_t name_len, int dtype, int ndim,
                                   const int64_t* shape, void* data, const int64_t* strides, int strides_len,
                                   const int64_t* global_shape, int global_len, const int64_t* offsets,
                                   int offsets_len);

/** Adds a scalar; logical conversion as for arrays. */
int cairn_f_state_add_scalar(cairn_state_t* state, const char* name, size_t name_len, int dtype, void* value,
                             size_t elem_size, const void* true_value, const void* false_value);

/** Adds a blank-padded Fortran string of `len` characters (trailing blanks
 *  are not stored; a loaded value is padded with blanks). */
int cairn_f_state_add_string(cairn_state_t* state, const char* name, size_t name_len, char* buffer, size_t len);

/** Adds a byte blob, as cairn_state_add_bytes. */
int cairn_f_state_add_bytes(cairn_state_t* state, const char* name, size_t name_len, void* data, size_t capacity,
                            size_t* size);

/** The resize callback of a Fortran row array: the buffer of `rows` rows. */
typedef void* (*cairn_f_rows_resize_fn)(int64_t rows, void* user);

/** cairn_state_add_rows with Fortran names, `row_shape` in Fortran order
 *  (the rows the last dimension) and a callback per array. */
int cairn_f_state_add_rows(cairn_state_t* state, const char* group, size_t group_len, const char* array,
                           size_t array_len, int dtype, int64_t rows, int row_ndim, const int64_t* row_shape,
                           void* data, cairn_f_rows_resize_fn resize, void* user);

/** cairn_state_rows_split_counts and cairn_state_rows with a Fortran group name. */
int cairn_f_state_rows_split_counts(cairn_state_t* state, const char* group, size_t group_len, int64_t rows);
int cairn_f_state_rows(cairn_state_t* state, const char* group, size_t group_len, int64_t* local_rows,
                       int64_t* offset, int64_t* global_rows);

/** cairn_load_options_add_may_be_missing with a Fortran key. */
int cairn_f_load_options_add_may_be_missing(cairn_load_options_t* options, const char* key, size_t key_len);

/** cairn_save / cairn_load with a Fortran path and communicator. */
int cairn_f_save(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                 const cairn_save_options_t* options, cairn_save_result_t* result);
int cairn_f_load(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                 const cairn_load_options_t* options, cairn_load_result_t* result);

/** cairn_{save,load}_options_set_per_rank_hint (`layout`
 *  CAIRN_LAYOUT_PER_RANK) or _container_hint (CAIRN_LAYOUT_CONTAINER) with
 *  Fortran strings (the module leaves out trailing blanks); `has_value` 0
 *  removes the hint. */
int cairn_f_save_options_set_hint(cairn_save_options_t* options, int layout, const char* key, size_t key_len,
                                  const char* value, size_t value_len, int has_value);
int cairn_f_load_options_set_hint(cairn_load_options_t* options, int layout, const char* key, size_t key_len,
                                  const char* value, size_t value_len, int has_value);

/** Fails with CAIRN_ERR_USAGE: sets the last error of this thread to
 *  "<function>: <message>" (Fortran strings) and returns CAIRN_ERR_USAGE. For
 *  errors the module finds itself (an option value of a type it does not take). */
int cairn_f_usage_error(const char* function, size_t function_len, const char* message, size_t message_len);

/** cairn_verify with a Fortran path and communicator. */
int cairn_f_verify(const char* path, size_t path_len, MPI_Fint comm, const cairn_load_options_t* options,
                   cairn_verify_result_t* result);

/** cairn_metadata_read / cairn_metadata_find with Fortran strings. */
int cairn_f_metadata_read(const char* path, size_t path_len, cairn_metadata_t** metadata);
int cairn_f_metadata_find(const cairn_metadata_t* metadata, const char* name, size_t name_len, size_t* index);

/** cairn_async_save with a Fortran path and communicator. */
int cairn_f_async_save(cairn_state_t* state, const char* path, size_t path_len, MPI_Fint comm,
                       const cairn_save_options_t* options, cairn_async_save_t** handle);

/** cairn_manager_create with a Fortran root and communicator, and the
 *  options as arguments: each pointer NULL for the default (`local_dir` and
 *  `redundancy` NUL-terminated: the node-local level, as
 *  cairn_manager_options_set_local_dir and the setters after it). An
 *  invalid value fails on every rank (collective, as cairn_manager_create). */
int cairn_f_manager_create(const char* root, size_t root_len, MPI_Fint comm, const int* keep_last,
                           const int64_t* keep_every, const int* async, const int* layout,
                           const cairn_save_options_t* save_options, const char* local_dir, const char* redundancy,
                           const int* local_keep_last, const int* flush_every, const int* ranks_per_node,
                           cairn_manager_t** manager);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CAIRN_FORTRAN_SUPPORT_H */
