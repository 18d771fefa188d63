/* The C ABI of the ZeRO engine (libzero_engine.so): what the Python package
 * (python/zero) and other languages drive. It links neither libtorch nor
 * Python, so one build serves any interpreter that can call C (ctypes).
 *
 * Style is NCCL's: every function returns an int status, ZERO_OK (0) on
 * success, else a zero_status code (absl::StatusCode's numbers:
 * ZERO_INVALID_ARGUMENT, ZERO_FAILED_PRECONDITION, ZERO_INTERNAL, ...), with
 * the text in zero_engine_last_error(); outputs come back through pointers;
 * nothing throws or aborts across the boundary. Handles are owned by the
 * caller and destroyed explicitly, engines before the communicator and
 * devices they use. One thread drives one engine (and its communicator);
 * different engines may run on different threads.
 *
 * The ABI can grow: ZERO_ABI_VERSION_* say which this header is and
 * zero_engine_abi_version which the library is; every struct the caller
 * fills starts with `size`, set to sizeof the struct, which the library
 * checks (a caller built against another header gets ZERO_INVALID_ARGUMENT
 * naming the struct and both sizes, never a misread).
 *
 * Dtype codes are NCCL's ncclDataType_t (6 f16, 7 f32, 9 bf16); reduction
 * codes its ncclRedOp_t (0 sum, 2 max, 4 avg). */
#ifndef ZERO_CAPI_ZERO_ENGINE_H_
#define ZERO_CAPI_ZERO_ENGINE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The major changes when a function, struct or code changes incompatibly
 * (a caller must not use a library of another major); the minor when
 * something is added (a caller needs a library of at least its minor). */
#define ZERO_ABI_VERSION_MAJOR 1
#define ZERO_ABI_VERSION_MINOR 5

/* absl::StatusCode's numbers. */
enum zero_status {
  ZERO_OK = 0,
  ZERO_CANCELLED = 1,
  ZERO_UNKNOWN = 2,
  ZERO_INVALID_ARGUMENT = 3,
  ZERO_DEADLINE_EXCEEDED = 4,
  ZERO_NOT_FOUND = 5,
  ZERO_ALREADY_EXISTS = 6,
  ZERO_PERMISSION_DENIED = 7,
  ZERO_RESOURCE_EXHAUSTED = 8,
  ZERO_FAILED_PRECONDITION = 9,
  ZERO_ABORTED = 10,
  ZERO_OUT_OF_RANGE = 11,
  ZERO_UNIMPLEMENTED = 12,
  ZERO_INTERNAL = 13,
  ZERO_UNAVAILABLE = 14,
  ZERO_DATA_LOSS = 15,
  ZERO_UNAUTHENTICATED = 16
};

enum { ZERO_F16 = 6, ZERO_F32 = 7, ZERO_BF16 = 9 };
enum { ZERO_SUM = 0, ZERO_MAX = 2, ZERO_AVG = 4 };

typedef struct zero_devices* zero_devices_t;
typedef struct zero_comm* zero_comm_t;
typedef struct zero_engine* zero_engine_t;

/* The library's ABI version (the ZERO_ABI_VERSION_* it was built with).
 * A caller refuses a library whose major differs from its header's, or
 * whose minor is older. */
int zero_engine_abi_version(int* major, int* minor);

/* The text of this thread's latest failure ("" if none); valid until the
 * thread's next call into the library. */
const char* zero_engine_last_error(void);

/* How this library was built, as JSON text (static, never freed):
 * {"optimized": true|false, "assertions": true|false}. "optimized" is false
 * for Bazel's default (fastbuild, -O0): correct, but its host-side
 * optimizer and copies run about ten times slower, so benchmarks refuse it
 * (`bazel build -c opt //zero/capi:zero_engine`). */
const char* zero_engine_build_info(void);

/* ---- Devices: memory/device_system.h ----
 * `spec` is "auto" (cards if present, else host devices), "cuda",
 * "host:2x1GiB", "meta:8x80GB"; NULL or "" reads $ZERO_DEVICES (else auto). */
int zero_devices_create(zero_devices_t* devices, const char* spec);
int zero_devices_count(zero_devices_t devices, int* count);
int zero_devices_destroy(zero_devices_t devices);

/* ---- Communicators ----
 * Local: `world_size` ranks as threads of this process (comms[r] is rank r),
 * each driven by its own thread; a rank that waits longer than
 * `timeout_seconds` for its peers fails the group. `devices`: where the
 * ranks' engines run (their buffers may then be card memory, moved by
 * work on each rank's stream); NULL when every buffer is host memory. */
int zero_comm_create_local(zero_comm_t* comms, int world_size, double timeout_seconds,
                           zero_devices_t devices);

/* The caller's collectives, in NCCL's argument order, `user` in place of the
 * communicator. Each runs synchronously (recv holds the result when it
 * returns) and returns 0, or non-zero after zero_comm_set_error(text) (the
 * engine's error is then ZERO_INTERNAL with that code and text). Counts
 * are per rank, as in NCCL; in place is NCCL's (all-gather send == recv +
 * rank * count, reduce-scatter recv == send + rank * count). `stream` is the
 * engine's stream (a cudaStream_t on cards, NULL on host devices), already
 * synchronized. They are called on the communicator's own thread, one at a
 * time, in the order the engine issued them (the same on every rank); on
 * host devices the engine goes on meanwhile (the gradients' reductions
 * overlap backward), so the caller's thread must not hold a lock they
 * need while it waits on the engine. `abort` (may be NULL) is called when
 * this rank fails, so the caller can bring its peers down instead of
 * letting them wait. */
typedef struct zero_collectives {
  size_t size; /* sizeof(zero_collectives) */
  int (*all_gather)(const void* send, void* recv, size_t count, int dtype, void* user,
                    void* stream);
  int (*reduce_scatter)(const void* send, void* recv, size_t count, int dtype, int op,
                        void* user, void* stream);
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, void* user,
                    void* stream);
  int (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root, void* user,
                   void* stream);
  int (*barrier)(void* user, void* stream);
  void (*abort)(const char* reason, void* user);
  void* user;
  /* ABI 1.3, may be NULL (and absent: size may end before it): send holds
   * world_size chunks of count, chunk r for rank r; recv gets rank r's
   * chunk for this rank at r * count. Quantized gradients need it. */
  int (*all_to_all)(const void* send, void* recv, size_t count, int dtype, void* user,
                    void* stream);
} zero_collectives;

/* Rank `rank` of `world_size` over `collectives` (copied; its `size` checked). */
int zero_comm_create(zero_comm_t* comm, int rank, int world_size,
                     const zero_collectives* collectives);
/* For a collective callback about to return non-zero: the error's text. */
void zero_comm_set_error(const char* message);
/* For collectives that run an all-to-all and reduce themselves (ABI 1.2):
 * out[i] = op over chunks r = 0..world_size-1 of chunks[r * count + i], in
 * fp32, in rank order, rounded once to `dtype`: the local backend's bits,
 * so every stage and world size agree. Host memory; split over the
 * process's CPU threads; `out` may be one of the chunks. */
int zero_reduce_in_rank_order(const void* chunks, int world_size, size_t count, int dtype,
                              int op, void* out);
/* ABI 1.3. Ranks on several nodes (zero/comm/hierarchical_communicator.h):
 * rank `rank`, `ranks_per_node` to a node, over `intra` (this node's ranks,
 * as local rank rank % ranks_per_node) and `inter` (the ranks of the same
 * local rank on every node, as rank rank / ranks_per_node). On success
 * `intra` and `inter` are emptied into it (still destroy their handles;
 * nothing else may use them). Scratch comes from the pool of `device` of
 * `devices`. */
int zero_comm_create_hierarchical(zero_comm_t* comm, int rank, int ranks_per_node,
                                  zero_comm_t intra, zero_comm_t inter, zero_devices_t devices,
                                  int device);
int zero_comm_destroy(zero_comm_t comm);

/* ---- One node's processes in one address range (ABI 1.4) ----
 * memory/node_range.h. This process's devices inside a range shared with
 * the node's other processes: `spec` names one host device
 * ("host:1x64GiB"); every local process calls it with the same `key`
 * (unique per range: e.g. from the process group's store), `local_world`
 * and spec, and its own `local_rank`; it returns when all have joined, or
 * fails (naming who) after `timeout_seconds`. The device's memory is then
 * readable in place by every local process at the same address. */
int zero_devices_create_node(zero_devices_t* devices, const char* spec, int local_rank,
                             int local_world, const char* key, double timeout_seconds);
/* The node's collectives over that range (zero/comm/node_communicator.h):
 * rank local_rank of local_world, reading peers in place; a peer that dies
 * or stalls fails the call after at most `timeout_seconds`. `devices` from
 * zero_devices_create_node, destroyed after the communicator. */
int zero_comm_create_node(zero_comm_t* comm, zero_devices_t devices, double timeout_seconds);
/* JSON about the range: {"base": B, "slice_bytes": S, "virtual_bytes": V,
 * "local_rank": r, "local_world": n, "announced_bytes": [per process]}.
 * FailedPrecondition for devices made otherwise. */
int zero_devices_node_info(zero_devices_t devices, char* buffer, size_t size, size_t* needed);
/* `bytes` from the pool of device `device` (tagged communication), and back:
 * buffers for zero_comm_* below that peers read in place. */
int zero_devices_allocate(zero_devices_t devices, int device, size_t bytes, void** ptr);
int zero_devices_free(zero_devices_t devices, int device, void* ptr, size_t bytes);

/* One collective on `comm`, run on the caller's thread and done when it
 * returns (benchmarks, tests): NCCL's arguments after the handle; dtype
 * and op are ZERO_F32... and ZERO_SUM... as in zero_collectives. */
int zero_comm_all_gather(zero_comm_t comm, const void* send, void* recv, size_t count, int dtype);
int zero_comm_reduce_scatter(zero_comm_t comm, const void* send, void* recv, size_t count,
                             int dtype, int op);
int zero_comm_all_reduce(zero_comm_t comm, const void* send, void* recv, size_t count, int dtype,
                         int op);

/* ---- Engines: zero/engine.h ---- */
typedef struct zero_param_spec {
  size_t size;       /* sizeof(zero_param_spec), in every element */
  const char* name;  /* unique */
  size_t numel;
  int module;  /* stage 3 fetches by module: the module that uses it */
  int group;   /* its optimizer parameter group, index into optimizer.groups */
} zero_param_spec;

/* Collective over `comm`: every rank with the same parameters and config.
 * `config_json` is one object; every key is optional except "optimizer":
 *   stage (0-3), gradient_accumulation_steps, average_micro_batches
 *   (default true; false: the step's gradient is the micro-batches' sum),
 *   bucket_elements,
 *   max_grad_norm (0: off), param_dtype ("f32", "bf16", "f16"),
 *   reduce_chunk_elements, loss_scaler {initial_scale, growth_factor,
 *   backoff_factor, growth_interval, hysteresis, min_scale,
 *   consecutive_hysteresis, raise_error_at_min_scale}, offload ("none", "optimizer",
 *   "parameters"),
 *   offload_device ("cpu", "nvme": optimizer state in a file under nvme_path),
 *   nvme_path, nvme_chunk_elements,
 *   host_capacity, offload_overlap, overlap_comm, prefetch_elements, max_live_elements,
 *   max_reuse_distance, persistence_threshold, quantized_weights_bits,
 *   quantized_gradients_bits (0, 4 or 8), quantization_block,
 *   stochastic_rounding, error_feedback, hpz_partition_size,
 *   shard_group_size (zero/config.h says each),
 *   optimizer {type: "adam" | "adamw" | "sgd", groups: [{...}, ...]} with
 *   torch's keys and defaults per group: adam/adamw {lr, betas, eps,
 *   weight_decay, maximize}, sgd {lr, momentum, dampening, weight_decay,
 *   nesterov, maximize}.
 * An unknown key or a bad value is an error naming it. Parameters start at
 * zero: set them with zero_engine_set_param. The engine runs on device
 * `device` of `devices`. */
int zero_engine_create(zero_engine_t* engine, const char* config_json,
                       const zero_param_spec* params, int num_params, zero_comm_t comm,
                       zero_devices_t devices, int device);
int zero_engine_destroy(zero_engine_t engine);

/* Where parameter `param` is, in the model dtype (*dtype), while it is
 * whole: always below stage 3, between fetch and release of its module at
 * stage 3 (else ZERO_FAILED_PRECONDITION). Stable until the next release
 * (stage 3; below stage 3 for the engine's life): models may alias it. */
int zero_engine_param(zero_engine_t engine, int param, void** data, size_t* numel, int* dtype);
/* Sets parameter `param` from `numel` fp32 values (every rank the same). */
int zero_engine_set_param(zero_engine_t engine, int param, const float* values, size_t numel);

/* Collective at stage 3 (no-ops below): gathers / frees `module`'s
 * parameters; calls nest. */
int zero_engine_fetch(zero_engine_t engine, int module);
int zero_engine_release(zero_engine_t engine, int module);
/* After zero_engine_fetch, for a caller that reads the parameters on the
 * host (a CPU framework on host devices): waits until `module`'s parameters
 * hold their values and for nothing else (prefetches and gradient
 * reductions in flight go on; zero_engine_synchronize would wait for them). */
int zero_engine_wait_fetched(zero_engine_t engine, int module);

/* This micro-batch's gradient of `param` (`numel` elements of `dtype`, the
 * model dtype). Host memory is copied before returning; card memory is read
 * in the order of the engine's stream (zero_engine_stream): keep it until
 * then. Once per parameter per micro-batch. */
int zero_engine_add_grad(zero_engine_t engine, int param, const void* grad, size_t numel,
                         int dtype);
/* Collective: the optimizer step after gradient_accumulation_steps
 * micro-batches. Returns once the update is enqueued on the engine's stream
 * (the host does not wait for it): a collective of this step that fails on
 * the stream calls the update off on host devices, and is this call's error
 * when already known, else zero_engine_synchronize's (and the next call's). */
int zero_engine_step(zero_engine_t engine);
/* Drops the gradients of the current step. */
int zero_engine_zero_grad(zero_engine_t engine);

/* The engine's stream, where it orders its own work (gradient copies, the
 * step, the consumers of what fetch gathers): a cudaStream_t on cards, NULL
 * on host devices. A caller computing on another stream orders itself
 * against it: the engine's stream waits for the caller's before add_grad,
 * release and step; the caller's for the engine's after set_param, fetch and
 * step (with events; Python: torch.cuda.ExternalStream), or the host for
 * both with zero_engine_synchronize. */
int zero_engine_stream(zero_engine_t engine, void** stream);
/* Waits on the host until the work the engine has enqueued so far (on its
 * stream and its communication stream) is done; fails with a collective's
 * error if one failed after its call had returned. */
int zero_engine_synchronize(zero_engine_t engine);

/* Learning rate of parameter group `group`, used from the next update. */
int zero_engine_set_lr(zero_engine_t engine, int group, double lr);
/* Multiply the loss by this before backward (fp16; 1 otherwise). */
int zero_engine_loss_scale(zero_engine_t engine, double* scale);

/* Statistics as one JSON object (steps, skipped_steps, loss_scale,
 * last_grad_norm, micro_batches, device pool bytes per tag with peaks, host
 * bytes, collective traffic, the layout: parameters, padded elements,
 * per-rank shard, and stream_ops: the last step's operations enqueued, host
 * waits and driver calls on the rank's device, for the whole step, its
 * busiest micro-batch and its Step call: zero/internal/step_ops.h). Writes at most `size` bytes (NUL included) to `buffer`
 * and the full length plus one to *needed: call again with a larger buffer
 * when *needed > size. */
int zero_engine_stats_json(zero_engine_t engine, char* buffer, size_t size, size_t* needed);

/* ---- The owned state, parameter by parameter (ABI 1.1): zero/owned_state.h ----
 * What a framework's optimizer state_dict needs: each rank owns a piece of
 * every parameter's model state (fp32 master weights and the optimizer's
 * state buffers), elements [*begin, *begin + *count) of the parameter
 * flattened (*count 0: none here), with *planes planes: plane 0 the
 * masters, plane 1 + i optimizer state i (adam/adamw: exp_avg, exp_avg_sq;
 * sgd with momentum: momentum_buffer); any of the three may be NULL.
 * Between steps, on the engine's thread. */
int zero_engine_owned_piece(zero_engine_t engine, int param, size_t* begin, size_t* count,
                            int* planes);
/* Copies elements [begin, begin + count) of parameter `param` (within this
 * rank's piece) of plane `plane` into / from `values` (fp32, host memory).
 * Written values take effect, with everything derived from them (the
 * parameters, whole or gathered, and model-dtype copies), at
 * zero_engine_restore, which every rank must call after writing. */
int zero_engine_owned_read(zero_engine_t engine, int param, int plane, size_t begin,
                           size_t count, float* values);
int zero_engine_owned_write(zero_engine_t engine, int param, int plane, size_t begin,
                            size_t count, const float* values);
/* Collective, every rank with the same `steps`: rebuilds what derives from
 * the owned state and resumes at step count `steps` (the loss scale kept);
 * gradients in flight are dropped. */
int zero_engine_restore(zero_engine_t engine, int64_t steps);

/* ---- Checkpoints: zero/checkpoint/checkpoint.h ----
 * Collective, between steps, every rank with the same `root`: writes this
 * step's checkpoint (root/step-N/, then root/latest) and returns the folder
 * written as zero_engine_stats_json returns its text (`path` may be NULL).
 * On error, the same on every rank, `latest` still names the previous
 * checkpoint, intact. */
int zero_engine_save(zero_engine_t engine, const char* root, char* path, size_t size,
                     size_t* needed);
/* The same without blocking training for the copy and the write
 * (checkpoint::AsyncSaver): zero_engine_save_start returns once the ranks
 * have agreed on the folder, while a thread copies this rank's state (the
 * engine's next step waits for that copy) and another writes the file.
 * zero_engine_save_wait, collective too, waits for the file, publishes it
 * and returns its folder as zero_engine_save does (ZERO_FAILED_PRECONDITION
 * when no save is pending). A start or a zero_engine_save while a save is
 * pending publishes that one first, returning its error if it failed;
 * destroying the engine waits for the write and publishes nothing. Until
 * the next step, do not write parameters in place (at stage 0-2 without
 * mixed precision or offload they are the masters being copied). With the
 * state on NVMe, the start itself copies it. */
int zero_engine_save_start(zero_engine_t engine, const char* root);
int zero_engine_save_wait(zero_engine_t engine, char* path, size_t size, size_t* needed);
/* ABI 1.5. As zero_engine_save_start, but the save is published as soon as
 * every rank's file is written (a background thread of rank 0 reads the
 * ranks' records from the folder: every rank must see it), not at
 * zero_engine_save_wait, which then only agrees on the outcome: for
 * snapshots taken every step, which training should never wait for. */
int zero_engine_snapshot_start(zero_engine_t engine, const char* root);
/* Collective, every rank with the same `path` (a root with `latest`, or a
 * step folder), written by any number of ranks at any stage: the engine
 * resumes where the checkpoint was taken. On error nothing has changed. */
int zero_engine_load(zero_engine_t engine, const char* path);
/* Not collective, no engine: the checkpoint's fp32 master weights as one
 * safetensors file at `output` (zero/checkpoint/consolidate.h; flat shapes). */
int zero_checkpoint_consolidate(const char* checkpoint, const char* output);

/* ---- The ZeRO paper's model states: zero/model_state_formula.h ----
 * Not collective, no engine: the bytes one rank holds of parameters,
 * gradients and optimizer state, for `psi` parameters (padded as the layout
 * pads them) over `ranks` ranks at `stage` (0-3), `param_bytes` and
 * `grad_bytes` per element in the model dtype, `optimizer_bytes` of
 * optimizer state per element (fp32 master weights when the model is not
 * fp32, plus the moments: Adam 8, SGD with momentum 4), `offload` a
 * zero_offload code, `nvme` non-zero with the optimizer state in a file,
 * `accumulation` micro-batches per step. Writes the device's, the pinned
 * host's and the NVMe file's bytes through those pointers that are not
 * NULL. ZERO_INVALID_ARGUMENT naming the argument for a negative or
 * non-finite count, ranks < 1, a stage outside 0-3, accumulation < 1, an
 * unknown offload code, parameter offload below stage 3, or nvme without
 * offload. */
enum zero_offload {
  ZERO_OFFLOAD_NONE = 0,
  ZERO_OFFLOAD_OPTIMIZER = 1,  /* master weights, moments, fp32 gradients on the host */
  ZERO_OFFLOAD_PARAMETERS = 2  /* stage 3: the parameters' pieces too */
};
int zero_model_state_bytes(double psi, int ranks, int stage, double param_bytes,
                           double grad_bytes, double optimizer_bytes, int offload, int nvme,
                           int accumulation, double* device_bytes, double* host_bytes,
                           double* nvme_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZERO_CAPI_ZERO_ENGINE_H_ */
