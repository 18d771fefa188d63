"""lightning.pytorch.Trainer over zero.wrap: a Strategy.

    from zero.lightning import ZeroStrategy
    trainer = lightning.pytorch.Trainer(strategy=ZeroStrategy(stage=3), accelerator="cpu",
                                        devices=2, precision="bf16-mixed")
    trainer.fit(module)                  # torchrun --nproc_per_node=2 train.py, or plain python

ZeroStrategy is Lightning's DDPStrategy (cluster environment, process
group, launcher, samplers) without DistributedDataParallel: at fit it
wraps the LightningModule and the one optimizer configure_optimizers
returns with zero.wrap (zero reduces the gradients). The lr schedulers keep
the optimizer configure_optimizers made: its param_groups are the wrapped
optimizer's. What the Trainer's arguments say and the engine must do goes
into the config: accumulate_grad_batches (gradient_accumulation_steps, the
micro-batches summed: Lightning divides each loss), gradient_clip_val (the
engine clips by norm at the step, over the sharded gradients), precision
"bf16-mixed" / "bf16-true" (bf16). The parameters hold no gradients after
backward (the engine has them): hooks that read p.grad see None.

Checkpoints (ModelCheckpoint, trainer.save_checkpoint, fit(ckpt_path=)) are
folders, as DeepSpeed's: zero/ holds zero's sharded checkpoint (fp32
masters, optimizer state, step count; loadable at another process count)
and lightning.ckpt Lightning's own (loops, callbacks, lr schedulers, the
param groups' hyperparameters, and the whole model's state_dict, gathered
at stage 3: LightningModule.load_from_checkpoint reads it without zero).
A save with weights_only is one plain file. fit(ckpt_path=) also resumes a
plain Lightning file (DDP's): whole weights and a torch optimizer state."""

import os
from datetime import timedelta
from pathlib import Path

import lightning.pytorch as pl
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.overrides.distributed import _sync_module_states
from lightning.pytorch.plugins.precision import HalfPrecision, MixedPrecision, Precision
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.model_helpers import is_overridden

from . import _checkpoint, _config, _optim_state
from ._lib import ZeroError
from ._wrap import ZeroOptimizer, wrap

ZERO_DIR = "zero"  # zero's sharded checkpoint, inside the checkpoint folder
LIGHTNING_FILE = "lightning.ckpt"  # Lightning's own checkpoint dict, beside it
SHARDED = "zero_sharded_checkpoint"  # the key that marks lightning.ckpt as ours
# Trainer(precision=...) -> whether the engine keeps bf16 parameters. fp16
# needs the loss multiplied by the engine's loss scale before backward,
# which Lightning's precision plugins do not do (their GradScaler needs
# p.grad, which the engine holds).
_PRECISIONS = {(Precision, "32-true"): False, (MixedPrecision, "bf16-mixed"): True,
               (HalfPrecision, "bf16-true"): True}


def _wrapped(module):
    return module is not None and getattr(module, "_zero_state", None) is not None


class ZeroStrategy(DDPStrategy):
    """`zero_config`: the config zero.wrap takes (dict or JSON path); `stage`:
    shorthand for its zero_optimization.stage. The rest as DDPStrategy's."""

    def __init__(self, zero_config=None, stage=None, accelerator=None, parallel_devices=None,
                 cluster_environment=None, precision_plugin=None, process_group_backend=None,
                 timeout: timedelta = default_pg_timeout, start_method="popen"):
        super().__init__(accelerator=accelerator, parallel_devices=parallel_devices,
                         cluster_environment=cluster_environment,
                         precision_plugin=precision_plugin,
                         process_group_backend=process_group_backend, timeout=timeout,
                         start_method=start_method)
        config = dict(_config.load(zero_config))
        if stage is not None:
            optimization = dict(config.get("zero_optimization", {}))
            if optimization.get("stage", stage) != stage:
                raise ZeroError("ZeroStrategy(stage=%d) but zero_config's zero_optimization.stage "
                                "is %r: set it in one place" % (stage, optimization["stage"]))
            optimization["stage"] = stage
            config["zero_optimization"] = optimization
        self.zero_config = config

    # ---- precision: checked when the Trainer hands its plugin over ----
    @property
    def precision_plugin(self):
        return DDPStrategy.precision_plugin.fget(self)

    @precision_plugin.setter
    def precision_plugin(self, plugin):
        if plugin is not None and (type(plugin), getattr(plugin, "precision", None)) \
                not in _PRECISIONS:
            raise ZeroError("ZeroStrategy: Trainer(precision=%r) is not supported: use '32-true', "
                            "'bf16-mixed' or 'bf16-true' (fp16 needs the engine's loss scale, "
                            "which Lightning's precision plugins do not apply)"
                            % getattr(plugin, "precision", type(plugin).__name__))
        DDPStrategy.precision_plugin.fset(self, plugin)

    # ---- setup: zero.wrap where DDPStrategy wraps in DistributedDataParallel ----
    def setup(self, trainer):
        self.accelerator.setup(trainer)
        if trainer.state.fn == TrainerFn.FITTING:
            if _wrapped(self.lightning_module):
                raise ZeroError("ZeroStrategy: this LightningModule was wrapped by an earlier fit "
                                "(zero.wrap holds its parameters): fit a new instance, resuming "
                                "with ckpt_path=")
            if self._layer_sync:
                self.model = self._layer_sync.apply(self.model)
            # No precision_plugin.convert_module: with bf16 zero.wrap casts
            # the parameters (keeping fp32 masters of their initial values)
            # and the buffers itself.
            self.model_to_device()
            self.setup_optimizers(trainer)
            self._wrap(trainer)
        elif not _wrapped(self.lightning_module):
            # As DDPStrategy outside fit. A module wrapped by an earlier fit
            # stays as it is: its parameters are the engine's memory.
            self.model = self.precision_plugin.convert_module(self.model)
            self.model_to_device()
            _sync_module_states(self.model)
        self.setup_precision_plugin()

    def _wrap(self, trainer):
        if len(self.optimizers) != 1:
            raise ZeroError("ZeroStrategy: configure_optimizers returned %d optimizers; zero.wrap "
                            "takes one" % len(self.optimizers))
        model, optimizer = wrap(self.lightning_module, self.optimizers[0],
                                self._engine_config(trainer))
        self.model = model
        self.optimizers = [optimizer]

    def _engine_config(self, trainer):
        """zero_config with what the Trainer's arguments say filled in."""
        module = self.lightning_module
        if is_overridden("configure_gradient_clipping", module, pl.LightningModule):
            raise ZeroError("ZeroStrategy: %s overrides configure_gradient_clipping, but the "
                            "parameters hold no gradients then (the engine does, sharded): clip "
                            "with Trainer(gradient_clip_val=...), which the engine applies at "
                            "the step" % type(module).__name__)
        settings = {"gradient_accumulation_steps": (trainer.accumulate_grad_batches,
                                                    "Trainer(accumulate_grad_batches)")}
        if trainer.gradient_clip_val:
            if trainer.gradient_clip_algorithm not in (None, "norm"):
                raise ZeroError("ZeroStrategy: Trainer(gradient_clip_algorithm=%r) is not "
                                "supported: the engine clips by the global norm ('norm')"
                                % getattr(trainer.gradient_clip_algorithm, "value",
                                          trainer.gradient_clip_algorithm))
            settings["gradient_clipping"] = (float(trainer.gradient_clip_val),
                                             "Trainer(gradient_clip_val)")
        plugin = self.precision_plugin
        bf16 = _PRECISIONS[(type(plugin), plugin.precision)]
        config = self.zero_config
        asked = {flag: isinstance(config.get(flag), dict) and bool(config[flag].get("enabled"))
                 for flag in ("bf16", "fp16")}
        if asked["fp16"] or (asked["bf16"] and not bf16):
            raise ZeroError("ZeroStrategy: zero_config enables %s but Trainer(precision=%r): "
                            "pass precision='bf16-mixed' or 'bf16-true' for bf16 (fp16 is not "
                            "supported)" % ("fp16" if asked["fp16"] else "bf16", plugin.precision))
        if bf16:
            settings["bf16"] = ({**config.get("bf16", {}), "enabled": True},
                                "Trainer(precision)")
        return _config.framework_config(config, settings)

    def on_train_start(self):
        """The engine steps after exactly accumulate_grad_batches
        micro-batches; Lightning also steps after an epoch's last, partial
        window, which the engine would refuse mid-run."""
        trainer = self.lightning_module.trainer
        k, batches = trainer.accumulate_grad_batches, trainer.num_training_batches
        if k > 1 and batches != float("inf") and batches % k:
            raise ZeroError("ZeroStrategy: an epoch has %d batches, not a multiple of "
                            "accumulate_grad_batches=%d: the engine steps after exactly %d "
                            "micro-batches (set limit_train_batches or the data to a multiple)"
                            % (batches, k, k))

    # ---- the steps ----
    def _in_forward(self, step, args, kwargs):
        """At stage 3 a step runs as the wrapped model's forward does: the
        parameters it reads outside their modules (a loss on a tied weight,
        training_step calling submodules) are gathered on use, and what
        autograd saves of them is rebuilt in backward."""
        state = getattr(self.lightning_module, "_zero_state", None)
        if state is None or state.stage3 is None:
            return step(*args, **kwargs)
        return state.stage3.run_forward(step, args, kwargs)

    def training_step(self, *args, **kwargs):
        return self._in_forward(super().training_step, args, kwargs)

    def validation_step(self, *args, **kwargs):
        return self._in_forward(super().validation_step, args, kwargs)

    def test_step(self, *args, **kwargs):
        return self._in_forward(super().test_step, args, kwargs)

    def predict_step(self, *args, **kwargs):
        return self._in_forward(super().predict_step, args, kwargs)

    def optimizer_step(self, optimizer, closure, model=None, **kwargs):
        """ZeroOptimizer.step takes no closure: Lightning's closure (training
        step, backward) and the precision plugin's after-closure hooks
        (on_before_optimizer_step; its clipping finds no gradients, the
        engine clips) run first, then the engine's step."""
        if not isinstance(optimizer, ZeroOptimizer):
            return super().optimizer_step(optimizer, closure, model, **kwargs)
        model = model or self.lightning_module
        result = self.precision_plugin._wrap_closure(model, optimizer, closure)
        if result is None and model.automatic_optimization:
            raise ZeroError("ZeroStrategy: training_step returned None (skipping the batch): the "
                            "engine steps over every micro-batch's gradients on every process")
        stage3 = optimizer._zero_state.stage3
        if stage3 is not None:
            # Manual optimization steps inside training_step: inside the
            # stage 3 root frame _in_forward opened.
            stage3.release_root()
        optimizer.step(**kwargs)
        for config in self.lr_scheduler_configs:
            # torch's mark that step ran, on the optimizer the scheduler was
            # made on (configure_optimizers' own, stepped through zero's):
            # without it the scheduler warns of a step before optimizer.step.
            if config.scheduler.optimizer.param_groups is optimizer.param_groups:
                config.scheduler.optimizer._opt_called = True
        return result

    # ---- checkpoints ----
    def lightning_module_state_dict(self):
        """The whole model on rank 0 ({} elsewhere); collective at stage 3."""
        if not _wrapped(self.lightning_module):
            return super().lightning_module_state_dict()
        return _checkpoint.state_dict(self.lightning_module) or {}

    def optimizer_state(self, optimizer):
        """The param groups' hyperparameters (lr as the schedulers left it):
        the state itself goes to the sharded checkpoint."""
        optimizer = getattr(optimizer, "_optimizer", optimizer)
        if not isinstance(optimizer, ZeroOptimizer):
            return super().optimizer_state(optimizer)
        return {"param_groups": _optim_state.hyperparameters(optimizer.param_groups),
                SHARDED: ZERO_DIR}

    def save_checkpoint(self, checkpoint, filepath, storage_options=None):
        if storage_options is not None:
            raise ZeroError("ZeroStrategy: save_checkpoint(storage_options=...) is not supported "
                            "(the sharded checkpoint is written by the engine, not CheckpointIO)")
        path = Path(self.broadcast(os.fspath(filepath)))
        if not _wrapped(self.lightning_module) or "optimizer_states" not in checkpoint:
            return super().save_checkpoint(checkpoint, path)  # weights only: one plain file
        if self.is_global_zero and path.is_file():
            path.unlink()  # a plain checkpoint saved here before
        self.barrier("ZeroStrategy.save_checkpoint")
        folder = _checkpoint.save_checkpoint(self.lightning_module, path / ZERO_DIR)
        if self.is_global_zero:
            # A path saved again (ModelCheckpoint's last.ckpt) holds the
            # newest state only.
            _checkpoint.keep_only(path / ZERO_DIR, Path(folder).name)
            self.checkpoint_io.save_checkpoint({**checkpoint, SHARDED: ZERO_DIR},
                                               path / LIGHTNING_FILE)
        self.barrier("ZeroStrategy.save_checkpoint")

    @property
    def restore_checkpoint_after_setup(self):
        return True  # the sharded checkpoint loads into the wrapped model

    def load_checkpoint(self, checkpoint_path, weights_only=None):
        path = Path(self.broadcast(os.fspath(checkpoint_path)))
        if not path.is_dir():
            return super().load_checkpoint(path, weights_only)  # a plain Lightning file
        if not (path / LIGHTNING_FILE).is_file() or not (path / ZERO_DIR).is_dir():
            raise ZeroError("'%s' is a folder without %s and %s/: not a checkpoint ZeroStrategy "
                            "saved" % (path, LIGHTNING_FILE, ZERO_DIR))
        checkpoint = self.checkpoint_io.load_checkpoint(path / LIGHTNING_FILE,
                                                        weights_only=weights_only)
        if _wrapped(self.lightning_module):
            _checkpoint.load_checkpoint(self.lightning_module, path / ZERO_DIR)
        else:
            checkpoint.pop(SHARDED, None)  # not fitting: the whole state_dict loads
        return checkpoint

    def load_model_state_dict(self, checkpoint, strict=True):
        module = self.lightning_module
        if checkpoint.get(SHARDED) is None or not _wrapped(module):
            # A wrapped module's load_state_dict is zero.load_state_dict.
            return super().load_model_state_dict(checkpoint, strict)
        _load_unsharded(module, checkpoint["state_dict"], strict)

    def load_optimizer_state_dict(self, checkpoint):
        for optimizer, saved in zip(self.optimizers, checkpoint["optimizer_states"]):
            if not isinstance(optimizer, ZeroOptimizer) or saved.get(SHARDED) is None:
                optimizer.load_state_dict(saved)  # a torch state (collective for ZeroOptimizer)
                continue
            _optim_state.set_hyperparameters(optimizer.param_groups, saved["param_groups"],
                                             "the checkpoint")

    def teardown(self):
        """Strategy.teardown moves the LightningModule to the CPU: a wrapped
        one's parameters are the engine's memory (on a card .cpu() would
        replace them by copies the engine never updates), so it is left be."""
        module = self.lightning_module
        if not _wrapped(module):
            return super().teardown()
        self._lightning_module = None
        try:
            super().teardown()
        finally:
            self._lightning_module = module


def _load_unsharded(module, values, strict):
    """What a sharded checkpoint does not hold, from the whole state_dict:
    buffers and frozen parameters. The engine's parameters came from its
    fp32 masters (exact at bf16, where the state_dict's copies are rounded)."""
    state = module._zero_state
    named = module.state_dict(keep_vars=True)  # references only: stage 3's are empty
    if strict and set(named) != set(values):
        raise ZeroError("load_state_dict: missing keys %s, unexpected keys %s"
                        % (sorted(set(named) - set(values)), sorted(set(values) - set(named))))
    rest = {k: v for k, v in values.items()
            if k in named and id(named[k]) not in state.by_param}
    _checkpoint.load_state_dict(module, rest, strict=False)
