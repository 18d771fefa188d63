"""transformers.Trainer over zero.wrap: the Trainer a Hugging Face user has,
with one more argument.

    from zero.hf import ZeroTrainer
    trainer = ZeroTrainer(model=model, args=TrainingArguments(...),
                          train_dataset=data, zero_config={"zero_optimization": {"stage": 3}})
    trainer.train()                      # torchrun --nproc_per_node=N train.py

The Trainer builds its optimizer (and lr scheduler) from TrainingArguments
as usual; ZeroTrainer wraps model and optimizer with zero.wrap right there,
so no DistributedDataParallel goes around the model (zero reduces the
gradients). What the Trainer's arguments say and the engine must do is
taken into the config: gradient_accumulation_steps, max_grad_norm (the
engine clips at the step, over the sharded gradients: the Trainer's own
clip is off and it logs no grad_norm), bf16 / fp16.
The Trainer divides each micro-batch's loss itself, so the engine sums the
micro-batches instead of averaging them.

Checkpoints (save_steps, resume_from_checkpoint) are the Trainer's folders
with zero's sharded checkpoint inside (checkpoint-N/zero/): the masters,
optimizer state and step count, loadable at another process count; the
model weights beside it are whole (gathered at stage 3) and the lr
scheduler's state is the Trainer's file. Accelerate alone needs nothing of
this module: zero.wrap, then accelerator.prepare(model, optimizer, data)."""

import os

import torch
import transformers
from transformers.trainer import SCHEDULER_NAME

from . import _checkpoint, _config, _optim_state
from ._lib import ZeroError
from ._wrap import ZeroOptimizer, wrap

ZERO_CHECKPOINT = "zero"  # the sharded checkpoint's folder inside checkpoint-N/
# The param groups' hyperparameters (lr as the scheduler left it, ...): a
# plain torch resume gets them from optimizer.pt; zero's checkpoint keeps
# none (as DeepSpeed's), and a scheduler's load_state_dict sets no lr until
# its next step.
PARAM_GROUPS = "optimizer_param_groups.pt"


def engine_config(zero_config, args):
    """zero_config (a DeepSpeed-style dict or JSON path) with what
    TrainingArguments `args` say filled in; a conflict is an error."""
    config = _config.load(zero_config)
    settings = {"gradient_accumulation_steps": (args.gradient_accumulation_steps,
                                                "TrainingArguments.gradient_accumulation_steps")}
    for flag in ("bf16", "fp16"):
        if getattr(args, flag):
            settings[flag] = ({**config.get(flag, {}), "enabled": True}, "TrainingArguments." + flag)
    config = _config.framework_config(config, settings)
    if args.max_grad_norm and "gradient_clipping" not in config:
        config["gradient_clipping"] = float(args.max_grad_norm)
    # Stage 3 gathers a decoder layer at a time, as the Trainer's FSDP wraps
    # one (fewer, larger gathers; 11 host waits a micro-batch on a 4-layer
    # GPT-2 instead of 38), unless the config says otherwise.
    config["zero"].setdefault("fetch_granularity", "block")
    return config


class ZeroTrainer(transformers.Trainer):
    """transformers.Trainer whose model and optimizer zero.wrap holds;
    `zero_config` is the config zero.wrap takes."""

    def __init__(self, *args, zero_config=None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            raise ZeroError("ZeroTrainer shards the model itself: drop the TrainingArguments' "
                            "deepspeed / fsdp settings")
        if self.args.torch_compile:
            raise ZeroError("ZeroTrainer: torch_compile is not supported with zero.wrap")
        self.zero_config = engine_config(zero_config, self.args)

    def create_optimizer(self, model=None):
        if not isinstance(self.optimizer, ZeroOptimizer):
            super().create_optimizer(model)
            self.model, self.optimizer = wrap(self.model, self.optimizer, self.zero_config)
            self.model_wrapped = self.model
        return self.optimizer

    def _clip_grad_norm(self, model):
        # The engine clips at optimizer.step() (gradient_clipping above); the
        # parameters hold no gradients here to clip or measure.
        return None

    def _get_grad_norm(self, model, grad_norm=None):
        return None  # nothing logged: the engine's stats() has last_grad_norm

    def save_model(self, output_dir=None, _internal_call=False):
        """The whole model on the saving process (collective: stage 3
        gathers it module by module)."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if getattr(self.model, "_zero_state", None) is None:
            return super().save_model(output_dir, _internal_call)
        state_dict = _checkpoint.state_dict(self.model)
        if self.args.should_save:
            self._save(output_dir, state_dict=state_dict)

    def _save_optimizer_and_scheduler(self, output_dir):
        _checkpoint.save_checkpoint(self.model, os.path.join(output_dir, ZERO_CHECKPOINT))
        if not self.args.should_save:
            return
        torch.save(_optim_state.hyperparameters(self.optimizer.param_groups),
                   os.path.join(output_dir, PARAM_GROUPS))
        if self.lr_scheduler is not None:
            torch.save(self.lr_scheduler.state_dict(), os.path.join(output_dir, SCHEDULER_NAME))

    def _load_optimizer_and_scheduler(self, checkpoint):
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, ZERO_CHECKPOINT)
        if not os.path.isdir(path):
            raise ZeroError("'%s' has no zero checkpoint (%s/): it was not written by "
                            "ZeroTrainer" % (checkpoint, ZERO_CHECKPOINT))
        _checkpoint.load_checkpoint(self.model, path)
        groups = os.path.join(checkpoint, PARAM_GROUPS)
        if os.path.isfile(groups):
            _optim_state.set_hyperparameters(self.optimizer.param_groups,
                                             torch.load(groups, weights_only=True), "'%s'" % groups)
        scheduler = os.path.join(checkpoint, SCHEDULER_NAME)
        if self.lr_scheduler is not None and os.path.isfile(scheduler):
            self.lr_scheduler.load_state_dict(torch.load(scheduler, weights_only=True))
