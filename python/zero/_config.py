"""zero.wrap's config: a DeepSpeed config (dict or JSON file) mapped to the
engine's JSON (zero/capi/zero_engine.h), and the user's torch optimizer read
into its "optimizer" object. A key this runtime does not know, or one that
asks for something it does not do, is a ZeroError naming the key."""

import json
import math
import os

import torch

from ._lib import ZeroError

# Keys that change nothing here (logging), accepted so DeepSpeed files load.
_IGNORED = {"steps_per_print", "wall_clock_breakdown"}


class _Reader:
    """Pops keys from one config object and names the leftovers."""

    def __init__(self, obj, where):
        if not isinstance(obj, dict):
            raise ZeroError("config '%s' is not an object" % where)
        self.obj, self.where = dict(obj), where

    def take(self, key, kind, default=None, check=None):
        if key not in self.obj:
            return default
        value = self.obj.pop(key)
        name = "%s.%s" % (self.where, key) if self.where else key
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if not ok or (check is not None and not check(value)):
            raise ZeroError("config key '%s' has an unsupported value %r" % (name, value))
        return value

    def child(self, key):
        value = self.take(key, dict)
        return None if value is None else _Reader(value, key if not self.where
                                                  else "%s.%s" % (self.where, key))

    def done(self):
        for key in self.obj:
            name = "%s.%s" % (self.where, key) if self.where else key
            raise ZeroError("config key '%s' is unknown or not supported by zero" % name)


def load(config):
    """A dict from a dict, a JSON string path or None."""
    if config is None:
        return {}
    if isinstance(config, (str, os.PathLike)):
        with open(config) as f:
            return json.load(f)
    if isinstance(config, dict):
        return config
    raise ZeroError("config must be a dict or a JSON file path, not %s" % type(config).__name__)


def framework_config(config, settings):
    """A loaded config with what a training framework's own arguments say
    filled in: `settings` is {key: (value, the argument that says it)}; the
    config holding another value is a ZeroError (set it in one place). The
    frameworks (transformers.Trainer, Lightning) divide each micro-batch's
    loss by their count themselves, so the engine sums micro-batches."""
    config = dict(config)
    for key, (value, where) in settings.items():
        if key in config and config[key] != value:
            raise ZeroError("zero_config's '%s' is %r but %s says %r: set it in one place"
                            % (key, config[key], where, value))
        config[key] = value
    own = dict(config.get("zero", {}))
    own["average_micro_batches"] = False
    config["zero"] = own
    return config

_num = (int, float)
_count = lambda v: v >= 0 and int(v) == v  # noqa: E731 - DeepSpeed writes 5e8 for counts


def _offload(reader, key, stage_needed, engine, value, stage):
    sub = reader.child(key)
    if sub is None:
        return
    # NVMe (ZeRO-Infinity) holds the optimizer's state only: the engine does
    # not page stage-3 parameters to files yet.
    devices = ("none", "cpu", "nvme") if key == "offload_optimizer" else ("none", "cpu")
    device = sub.take("device", str, "none", lambda v: v in devices)
    nvme_path = sub.take("nvme_path", str, None) if device == "nvme" else None
    sub.take("pin_memory", bool)  # the host pool is always pinned on cards
    sub.done()
    if device == "nvme" and not nvme_path:
        raise ZeroError("config key 'zero_optimization.%s.nvme_path' is required with "
                        "device 'nvme'" % key)
    if device in ("cpu", "nvme"):
        if stage < stage_needed:
            raise ZeroError("config key 'zero_optimization.%s' needs stage >= %d"
                            % (key, stage_needed))
        engine["offload"] = value
    if device == "nvme":
        engine["offload_device"] = "nvme"
        engine["nvme_path"] = nvme_path


def _zeropp(z, engine):
    """DeepSpeed ZeRO++'s keys: true takes ZeRO++'s widths (int8 weights,
    int4 gradients); 4 or 8 picks one."""
    for key, name, width in (("zero_quantized_weights", "quantized_weights_bits", 8),
                             ("zero_quantized_gradients", "quantized_gradients_bits", 4)):
        value = z.obj.pop(key, False)
        if not (isinstance(value, bool) or value in (4, 8)):
            raise ZeroError("config key 'zero_optimization.%s' has an unsupported value %r "
                            "(true, false, 4 or 8)" % (key, value))
        if value is not False:
            engine[name] = width if value is True else int(value)
    hpz = z.take("zero_hpz_partition_size", int, 1, lambda v: v >= 1)
    if hpz > 1:
        engine["hpz_partition_size"] = hpz
    # Hybrid sharding: DeepSpeed's MiCS shard size (FSDP2's HSDP shard dim is
    # zero's own "zero": {"shard_group_size": ...}).
    mics = z.take("mics_shard_size", int, -1, lambda v: v == -1 or v >= 1)
    if mics > 0:
        engine["shard_group_size"] = mics


def _zero_optimization(reader, engine):
    z = reader.child("zero_optimization")
    if z is None:
        return
    stage = z.take("stage", int, 0, lambda v: 0 <= v <= 3)
    engine["stage"] = stage
    for key, name in (("reduce_bucket_size", "bucket_elements"),
                      ("stage3_prefetch_bucket_size", "prefetch_elements"),
                      ("stage3_param_persistence_threshold", "persistence_threshold"),
                      ("stage3_max_live_parameters", "max_live_elements"),
                      ("stage3_max_reuse_distance", "max_reuse_distance")):
        value = z.take(key, _num, None, _count)
        if value is not None:
            engine[name] = int(value)
    overlap = z.take("overlap_comm", bool, None)
    if overlap is not None:
        engine["overlap_comm"] = overlap
    # What the engine always does: accepted when asked for, an error when refused.
    for key in ("contiguous_gradients", "reduce_scatter"):
        z.take(key, bool, True, lambda v: v)
    _zeropp(z, engine)
    _offload(z, "offload_optimizer", 1, engine, "optimizer", stage)
    _offload(z, "offload_param", 3, engine, "parameters", stage)
    z.done()


def _precision(reader, engine):
    bf16, fp16 = reader.child("bf16"), reader.child("fp16")
    if bf16 is not None:
        if bf16.take("enabled", bool, False):
            engine["param_dtype"] = "bf16"
        bf16.done()
    if fp16 is not None:
        enabled = fp16.take("enabled", bool, False)
        fp16.take("loss_scale", _num, 0, lambda v: v == 0)  # only dynamic scaling
        scaler = {}
        power = fp16.take("initial_scale_power", int, None, lambda v: 0 <= v < 64)
        if power is not None:
            scaler["initial_scale"] = float(2 ** power)
        for key, name, kind in (("loss_scale_window", "growth_interval", int),
                                ("hysteresis", "hysteresis", int),
                                ("min_loss_scale", "min_scale", _num),
                                ("consecutive_hysteresis", "consecutive_hysteresis", bool)):
            value = fp16.take(key, kind)
            if value is not None:
                scaler[name] = value
        fp16.done()
        if enabled:
            if engine.get("param_dtype") == "bf16":
                raise ZeroError("config enables both 'bf16' and 'fp16'")
            engine["param_dtype"] = "f16"
            engine["loss_scaler"] = scaler


def engine_config(config, world_size):
    """The engine's config (without "optimizer") and zero's own options."""
    reader = _Reader(load(config), "")
    engine = {}
    for key in _IGNORED:
        reader.obj.pop(key, None)
    for key in ("optimizer", "scheduler"):
        if key in reader.obj:
            raise ZeroError("config key '%s': zero.wrap takes the torch optimizer (and its "
                            "scheduler) you pass, not one from the config" % key)
    _zero_optimization(reader, engine)
    _precision(reader, engine)
    clip = reader.take("gradient_clipping", _num, 0, lambda v: v >= 0 and math.isfinite(v))
    if clip:
        engine["max_grad_norm"] = float(clip)
    gas = reader.take("gradient_accumulation_steps", int, None, lambda v: v >= 1)
    micro = reader.take("train_micro_batch_size_per_gpu", int, None, lambda v: v >= 1)
    total = reader.take("train_batch_size", int, None, lambda v: v >= 1)
    if gas is None and micro and total:
        gas = total // (micro * world_size)
    if gas is not None and micro and total and total != gas * micro * world_size:
        raise ZeroError("config: train_batch_size %d != train_micro_batch_size_per_gpu %d x "
                        "gradient_accumulation_steps %d x %d processes"
                        % (total, micro, gas, world_size))
    engine["gradient_accumulation_steps"] = gas or 1
    own = reader.child("zero")  # this runtime's own options
    options = {}
    resilience = reader.child("resilience")
    if resilience is not None:
        options["resilience"] = {
            "snapshot_every": resilience.take("snapshot_every", int, 1, lambda v: v >= 1),
            "snapshot_dir": resilience.take("snapshot_dir", str),
            "checkpoint_dir": resilience.take("checkpoint_dir", str),
            "checkpoint_every": resilience.take("checkpoint_every", int, 0, lambda v: v >= 0),
        }
        resilience.done()
    if own is not None:
        options["devices"] = own.take("devices", str)
        options["ordered_reductions"] = own.take("ordered_reductions", bool, True)
        options["fetch_granularity"] = own.take("fetch_granularity", str, "module",
                                                lambda v: v in ("module", "block"))
        # False: one flat group even when torchrun's nodes hold several ranks.
        options["hierarchical"] = own.take("hierarchical", bool, True)
        # Unset: the node's processes share one address range where they can
        # (torchrun's local ranks on host devices); False: never; True: or fail.
        options["node_range"] = own.take("node_range", bool)
        for key in ("quantization_block", "stochastic_rounding", "error_feedback",
                    "shard_group_size"):
            value = own.take(key, bool if key in ("stochastic_rounding", "error_feedback")
                             else int)
            if value is not None:
                engine[key] = value
        # False: each micro-batch's loss is already divided by their count
        # (transformers.Trainer), so the step sums the micro-batches.
        average = own.take("average_micro_batches", bool, True)
        if not average:
            engine["average_micro_batches"] = False
        own.done()
    reader.done()
    return engine, options


_ADAM_KEYS = {"lr", "betas", "eps", "weight_decay", "maximize"}
_SGD_KEYS = {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize"}
# torch's options that change nothing in the arithmetic (implementation choices).
_NEUTRAL = {"params", "foreach", "fused", "capturable", "differentiable", "initial_lr",
            "decoupled_weight_decay"}


def optimizer_config(optimizer):
    """The engine's "optimizer" object for a torch optimizer, group by group."""
    kinds = {torch.optim.AdamW: ("adamw", _ADAM_KEYS), torch.optim.Adam: ("adam", _ADAM_KEYS),
             torch.optim.SGD: ("sgd", _SGD_KEYS)}
    kind = kinds.get(type(optimizer))
    if kind is None:
        raise ZeroError("optimizer %s is not supported (AdamW, Adam or SGD)"
                        % type(optimizer).__name__)
    name, keys = kind
    groups = []
    for i, group in enumerate(optimizer.param_groups):
        out = {}
        for key, value in group.items():
            if key in keys:
                out[key] = list(value) if key == "betas" else value
            elif key == "amsgrad" and value:
                raise ZeroError("optimizer option 'amsgrad' (param group %d) is not supported" % i)
            elif key == "decoupled_weight_decay" and value and name == "adam":
                name = "adamw"  # torch >= 2.6: Adam(decoupled_weight_decay=True) is AdamW
            elif key not in _NEUTRAL and key != "amsgrad" and not _is_off(value):
                raise ZeroError("optimizer option '%s' (param group %d) is not supported"
                                % (key, i))
        if isinstance(out.get("lr"), torch.Tensor):
            out["lr"] = float(out["lr"])
        groups.append(out)
    return {"type": name, "groups": groups}


def _is_off(value):
    return value is None or value is False
