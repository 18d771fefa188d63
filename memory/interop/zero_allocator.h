/* The C interface of libzero_allocator.so, the drop-in allocator for
 * PyTorch's torch.cuda.memory.CUDAPluggableAllocator(path, "zero_malloc",
 * "zero_free"). Memory comes from the process-wide DeviceSystem (devices from
 * $ZERO_DEVICES), created on the first call; ZERO_ALLOCATOR_CAP caps the live
 * bytes per device, ZERO_ALLOCATOR_STATS names a file that receives
 * zero_stats_json() at exit. Every function is thread-safe and never aborts:
 * failures return null (or do nothing), are counted, and their text is in
 * zero_last_error(). Nothing throws, except zero_malloc on out-of-memory
 * when ZERO_ALLOCATOR_OOM=throw (a std::bad_alloc whose what() is the
 * pool's message; for PyTorch, which ignores a null return). */
#ifndef ZERO_MEMORY_INTEROP_ZERO_ALLOCATOR_H_
#define ZERO_MEMORY_INTEROP_ZERO_ALLOCATOR_H_

#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

/* ABI-identical to cudaStream_t (a pointer to CUDA's opaque CUstream_st), so
 * callers need no CUDA header. Null is CUDA's default stream on cards and the
 * pool's default stream on host and meta devices (which accept only null). */
typedef struct CUstream_st* zero_stream_t;

/* `size` bytes on `device`, usable at once by work on `stream` and by other
 * streams after an event. Null when size <= 0, the device does not exist, the
 * stream is unusable, or the device (or its cap) is full. */
void* zero_malloc(ssize_t size, int device, zero_stream_t stream);

/* Frees `ptr` after the work already enqueued on `stream`; size, device and
 * stream as allocated. Null is a no-op. Foreign pointers, double frees and
 * size mismatches change nothing but the error counters. */
void zero_free(void* ptr, ssize_t size, int device, zero_stream_t stream);

/* Marks `ptr` as used by work on `stream` too (torch's Tensor.record_stream;
 * the signature of CUDAPluggableAllocator::set_record_stream_fn, which only
 * torch's C++ API exposes): its free then also waits for the work enqueued
 * on `stream` until then, so the block is not handed out again while that
 * work may still read it. A pointer this library did not allocate, or one
 * already freed, changes nothing but the error counters. */
void zero_record_stream(void* ptr, zero_stream_t stream);

/* The text of the latest failure in the process ("" if none). The pointer
 * stays valid until this thread calls zero_last_error again. */
const char* zero_last_error(void);

/* Per-device pool statistics, the cap and the error counters as one JSON
 * object, in memory from malloc(): the caller frees it with free(). */
char* zero_stats_json(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* ZERO_MEMORY_INTEROP_ZERO_ALLOCATOR_H_ */
