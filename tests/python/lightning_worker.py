"""The torchrun job of test_lightning.py: lightning.pytorch.Trainer under
DDPStrategy and under zero.lightning.ZeroStrategy at stages 0-3 on the
example GPT (tied weights, a frozen table, activation checkpointing), 2
processes, gloo. Rank 0 writes {run: result} as JSON to --out.

Every run: 2 epochs of 3 optimizer steps (accumulate_grad_batches=2,
gradient_clip_val, AdamW in two param groups, a per-step LambdaLR), a
validation at each epoch's end, and ModelCheckpoint after each epoch. Then:
the stage 3 run resumed from its epoch-0 checkpoint folder, stage 2
resumed from DDP's plain epoch-0 file, manual optimization (one epoch,
DDP and stage 3), a bf16-mixed run, and two settings
ZeroStrategy refuses (a configure_gradient_clipping override, an epoch
that ends inside an accumulation window)."""

import argparse
import json
import os

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy

import zero
from zero.examples.gpt import GPT, loss_fn, param_groups
from zero.lightning import ZeroStrategy

ROWS, PER_PROCESS_BATCH, ACCUMULATION, EPOCHS = 24, 2, 2, 2


class LitGPT(pl.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = GPT()

    def training_step(self, batch, batch_idx):
        tokens, targets = batch
        return loss_fn(self.net(tokens), targets)

    def validation_step(self, batch, batch_idx):
        tokens, targets = batch
        self.log("val_loss", loss_fn(self.net(tokens), targets), sync_dist=True)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(param_groups(self.net), lr=3e-3)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
        return {"optimizer": optimizer,
                "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class OwnClipping(LitGPT):
    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None,
                                    gradient_clip_algorithm=None):
        self.clip_gradients(optimizer, 0.1, "value")


class Manual(LitGPT):
    """Manual optimization: the step runs inside training_step (at stage 3,
    inside the frame that gathers parameters read outside their modules)."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = super().training_step(batch, batch_idx)
        self.manual_backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        self.lr_schedulers().step()
        return {"loss": loss.detach()}


def loader(rows, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 64, (rows, 17), generator=g)
    data = list(zip(tokens[:, :-1], tokens[:, 1:]))
    return torch.utils.data.DataLoader(data, batch_size=PER_PROCESS_BATCH, shuffle=False)


class Record(Callback):
    """Each micro-batch's loss on this process, the lr each step used, the
    validation loss of each epoch."""

    def __init__(self):
        self.losses, self.lrs, self.val, self.ddp = [], [], [], None

    def on_train_start(self, trainer, module):
        # DDPStrategy unwraps its model at teardown: looked at while training.
        self.ddp = isinstance(trainer.strategy.model, torch.nn.parallel.DistributedDataParallel)

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))

    def on_before_optimizer_step(self, trainer, module, optimizer):
        self.lrs.append([g["lr"] for g in optimizer.param_groups])

    def on_validation_epoch_end(self, trainer, module):
        self.val.append(float(trainer.callback_metrics["val_loss"]))


def fit(root, name, strategy, resume=None, module=LitGPT, **extra):
    """One Trainer.fit: what Record saw, whether the model was DDP-wrapped,
    and where ModelCheckpoint saved epoch 0."""
    record = Record()
    saver = ModelCheckpoint(dirpath=os.path.join(root, name), every_n_epochs=1, save_top_k=-1,
                            save_on_train_epoch_end=True)
    options = dict(accelerator="cpu", devices=int(os.environ["WORLD_SIZE"]), max_epochs=EPOCHS,
                   accumulate_grad_batches=ACCUMULATION, gradient_clip_val=0.5, logger=False,
                   enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0, callbacks=[record, saver])
    trainer = pl.Trainer(strategy=strategy, **{**options, **extra})
    trainer.fit(module(), loader(ROWS, 1), loader(8, 2), ckpt_path=resume)
    return {"losses": record.losses, "lrs": record.lrs, "val": record.val,
            "ddp": record.ddp,
            "checkpoint": os.path.join(root, name, "epoch=0-step=3.ckpt")}


def refused(root, name, strategy, **extra):
    """The ZeroError a fit raised on this process ("" if none)."""
    try:
        fit(root, name, strategy, **extra)
    except zero.ZeroError as e:
        return str(e)
    return ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    parser.add_argument("--out")
    a = parser.parse_args()
    root = a.root
    out = {"ddp": fit(root, "ddp", DDPStrategy(process_group_backend="gloo"))}
    for stage in range(4):
        out["zero%d" % stage] = fit(root, "zero%d" % stage, ZeroStrategy(stage=stage))
    out["resumed3"] = fit(root, "resumed3", ZeroStrategy(stage=3),
                          resume=out["zero3"]["checkpoint"])
    out["from_ddp"] = fit(root, "from_ddp", ZeroStrategy(stage=2),
                          resume=out["ddp"]["checkpoint"])
    manual = dict(module=Manual, max_epochs=1, accumulate_grad_batches=1, gradient_clip_val=None)
    out["manual_ddp"] = fit(root, "manual_ddp", DDPStrategy(process_group_backend="gloo"), **manual)
    out["manual3"] = fit(root, "manual3", ZeroStrategy(stage=3), **manual)
    out["bf16"] = fit(root, "bf16", ZeroStrategy(stage=2), precision="bf16-mixed")
    out["layout"] = sorted(os.listdir(out["zero3"]["checkpoint"]))
    out["refused_clip"] = refused(root, "clip", ZeroStrategy(stage=2), module=OwnClipping)
    out["refused_window"] = refused(root, "window", ZeroStrategy(stage=2), limit_train_batches=5)
    if int(os.environ["RANK"]) == 0:
        with open(a.out, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
