"""The wrapped optimizer's state in torch's protocol (optimizer.state_dict /
load_state_dict), as FSDP's sharded optimizer state is: per parameter,
keyed as torch keys it (its index in param_groups order), this rank's
pieces, and beside them what reassembles them.

    {"state": {i: {"step": tensor(steps), "exp_avg": tensor, "exp_avg_sq": tensor}},
     "param_groups": [{...torch's group keys..., "params": [i, ...]}],
     "zero": {"form": "sharded" or "full", "rank": r, "world_size": n, "steps": steps,
              "params": {i: {"name": qualified name, "shape": [...], "offset": e}},
              "master": {i: tensor}}}

A sharded tensor is flat: elements [offset, offset + numel) of the
parameter, flattened (the engine's piece; a parameter this rank holds none
of is absent). "master" holds the fp32 master weights of the same elements
(the parameters themselves at fp32; with bf16/fp16 the only exact copy).
The full form (full_state_dict, collective) holds whole tensors in the
parameters' shapes and offset 0: it is what torch's own optimizer returns,
plus "zero". load_state_dict takes either form, or a plain torch
optimizer's state_dict (whole tensors, no masters: the parameters stay), at
any world size where the pieces it holds cover this rank's; several ranks'
sharded dicts merge into a full one with merge_state_dicts.

state_dict() is not collective (Trainer calls it on one process);
load_state_dict() is (the engine rebuilds its parameters from the masters
on every rank), as full_state_dict() is."""

import torch
import torch.distributed as dist

from ._lib import ZeroError

_STATE_NAMES = {"adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"],
                "sgd": ["momentum_buffer"]}


def _names(state, planes):
    names = _STATE_NAMES[state.optimizer_cfg["type"]][:planes - 1]
    if len(names) != planes - 1:
        raise ZeroError("the engine keeps %d optimizer state buffers per element, %s has %d"
                        % (planes - 1, state.optimizer_cfg["type"], len(names)))
    return names


def _indices(param_groups):
    """id(param) -> torch's state_dict index (param_groups order)."""
    out = {}
    for group in param_groups:
        for p in group["params"]:
            out.setdefault(id(p), len(out))
    return out


def hyperparameters(param_groups):
    """Each group's settings (lr as a scheduler left it, betas, ...) without
    its parameters: what a checkpoint beside zero's keeps, since zero's own
    holds none (as DeepSpeed's)."""
    return [{k: v for k, v in g.items() if k != "params"} for g in param_groups]


def set_hyperparameters(param_groups, saved, where):
    """As torch's load_state_dict: the saved settings replace the groups'
    (lr; the others must match what the engine was built with, checked at
    step). A scheduler's own load_state_dict sets no lr until its next
    step, so a resume needs this. `where` names `saved` in the error."""
    if len(saved) != len(param_groups):
        raise ZeroError("%s has %d param groups, the optimizer %d"
                        % (where, len(saved), len(param_groups)))
    for group, values in zip(param_groups, saved):
        for key, value in values.items():
            if key != "params":
                group[key] = value


def _groups(param_groups, index_of):
    return [dict(settings, params=[index_of[id(p)] for p in g["params"]])
            for settings, g in zip(hyperparameters(param_groups), param_groups)]


def state_dict(state, param_groups):
    """This rank's pieces (not collective)."""
    engine, index_of = state.engine, _indices(param_groups)
    steps = engine.stats()["steps"]
    out, params, masters = {}, {}, {}
    for e in state.entries:
        begin, count, planes = engine.owned_piece(e.index)
        if count == 0:
            continue
        i = index_of[id(e.param)]
        entry = {"step": torch.tensor(float(steps))}
        for plane, name in enumerate(_names(state, planes), start=1):
            entry[name] = engine.owned_read(e.index, plane, begin, count)
        out[i] = entry
        masters[i] = engine.owned_read(e.index, 0, begin, count)
        params[i] = {"name": e.name, "shape": list(e.shape), "offset": begin}
    return {"state": out, "param_groups": _groups(param_groups, index_of),
            "zero": {"form": "sharded", "rank": engine.rank, "world_size": engine.world,
                     "steps": steps, "params": params, "master": masters}}


def full_state_dict(state, param_groups):
    """Collective: every parameter whole, in its shape, on every rank."""
    mine = state_dict(state, param_groups)
    if state.engine.world == 1:
        every = [mine]
    else:
        every = [None] * state.engine.world
        dist.all_gather_object(every, mine, group=state.engine.collectives.group)
    return merge_state_dicts(every)


def merge_state_dicts(dicts):
    """One full state_dict from sharded ones that together cover every
    element (every rank's of one save)."""
    first = dicts[0]
    full = {"state": {}, "param_groups": first["param_groups"],
            "zero": {"form": "full", "steps": first["zero"]["steps"], "params": {},
                     "master": {}}}
    if any(d.get("zero", {}).get("steps") != first["zero"]["steps"] for d in dicts):
        raise ZeroError("merging optimizer state_dicts of different steps: %s"
                        % sorted({d.get("zero", {}).get("steps") for d in dicts}))
    covered = {}
    for d in dicts:
        for i, meta in d["zero"]["params"].items():
            numel = _numel(meta["shape"])
            begin = meta["offset"]
            target = full["state"].setdefault(i, {"step": d["state"][i]["step"].clone()})
            values = dict(d["state"][i], master=d["zero"]["master"][i])
            for name, piece in values.items():
                if name == "step":
                    continue
                whole = target.setdefault(name, torch.zeros(numel, dtype=torch.float32))
                whole[begin:begin + piece.numel()] = piece.reshape(-1)
            full["zero"]["params"][i] = dict(meta, offset=0)
            covered[i] = covered.get(i, 0) + d["zero"]["master"][i].numel()
    for i, meta in full["zero"]["params"].items():
        if covered[i] != _numel(meta["shape"]):
            raise ZeroError("the state_dicts merged hold %d of the %d elements of parameter "
                            "'%s': merge every rank's" % (covered[i], _numel(meta["shape"]),
                                                           meta["name"]))
        entry = full["state"][i]
        full["zero"]["master"][i] = entry.pop("master").view(meta["shape"])
        for name in list(entry):
            if name != "step":
                entry[name] = entry[name].view(meta["shape"])
    return full


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def load_state_dict(state, param_groups, sd):
    """Collective: every rank checks what it would write first, and all
    refuse alike (nothing written) if any rank cannot take its pieces."""
    state.check_between_steps("optimizer.load_state_dict()")
    try:
        writes, steps = _plan(state, param_groups, sd), _steps(sd)
        error = None
    except ZeroError as e:
        writes, steps, error = None, None, str(e)
    errors = _agree(state, error)
    if errors:
        raise ZeroError("optimizer.load_state_dict() refused, nothing changed: " + "; ".join(errors))
    set_hyperparameters(param_groups, sd["param_groups"], "the state_dict")
    for index, plane, begin, values in writes:
        state.engine.owned_write(index, plane, begin, values)
    state.engine.restore(steps)


def _agree(state, error):
    """Every rank's error text (rank-prefixed), or [] when all may go on."""
    if state.engine.world == 1:
        return [error] if error else []
    every = [None] * state.engine.world
    dist.all_gather_object(every, error, group=state.engine.collectives.group)
    return ["rank %d: %s" % (r, e) for r, e in enumerate(every) if e]


def _steps(sd):
    if "zero" in sd:
        return int(sd["zero"]["steps"])
    steps = {float(entry["step"]) for entry in sd["state"].values() if "step" in entry}
    if len(steps) > 1:
        raise ZeroError("the state_dict's parameters are at different steps %s: the engine "
                        "keeps one step count" % sorted(steps))
    return int(steps.pop()) if steps else 0


def _plan(state, param_groups, sd):
    """(engine index, plane, begin, values) for every piece this rank owns."""
    _check_groups(state, param_groups, sd)
    index_of, meta = _indices(param_groups), sd.get("zero")
    writes = []
    for e in state.entries:
        begin, count, planes = state.engine.owned_piece(e.index)
        if count == 0:
            continue
        i = index_of[id(e.param)]
        source = sd["state"].get(i, sd["state"].get(str(i)))
        where = meta["params"].get(i) if meta else {"offset": 0}
        if source is None or where is None:
            if meta is None and not sd["state"]:  # a torch optimizer before its first step
                source, where = {}, {"offset": 0}
            else:
                raise ZeroError("it holds no state for parameter '%s' (index %d)%s"
                                % (e.name, i, _whose(meta)))
        planes_in = [(plane, source.get(name)) for plane, name in
                     enumerate(_names(state, planes), start=1)]
        if meta is not None:
            planes_in.append((0, meta["master"].get(i)))
        for plane, values in planes_in:
            values = _piece(e, values, where["offset"], begin, count, plane)
            writes.append((e.index, plane, begin, values))
    return writes


def _whose(meta):
    if meta is None or meta.get("form") != "sharded":
        return ""
    return (": it is rank %d of %d's pieces; load a full state_dict, or merge_state_dicts of "
            "every rank's" % (meta["rank"], meta["world_size"]))


def _piece(e, values, offset, begin, count, plane):
    """Elements [begin, begin + count) of `e` from a tensor holding
    [offset, offset + numel); zeros for a state never set (None)."""
    if values is None:
        if plane == 0:
            raise ZeroError("it holds no master weights for parameter '%s'" % e.name)
        return torch.zeros(count, dtype=torch.float32)
    flat = values.detach().reshape(-1)
    if offset > begin or begin + count > offset + flat.numel():
        raise ZeroError("it holds elements [%d, %d) of parameter '%s', this rank owns [%d, %d) "
                        "(load a full state_dict, or merge_state_dicts of every rank's)"
                        % (offset, offset + flat.numel(), e.name, begin, begin + count))
    return flat[begin - offset:begin - offset + count]


def _check_groups(state, param_groups, sd):
    saved = sd.get("param_groups")
    if saved is None or "state" not in sd:
        raise ZeroError("not an optimizer state_dict (no 'state' and 'param_groups')")
    if len(saved) != len(param_groups):
        raise ZeroError("it has %d param groups, the optimizer %d" % (len(saved), len(param_groups)))
    for n, (a, b) in enumerate(zip(saved, param_groups)):
        if len(a["params"]) != len(b["params"]):
            raise ZeroError("its param group %d has %d parameters, the optimizer's %d"
                            % (n, len(a["params"]), len(b["params"])))
        for key, value in state.optimizer_cfg["groups"][n].items():
            theirs = a.get(key, value)
            theirs = list(theirs) if key == "betas" else theirs
            if key != "lr" and theirs != value:
                raise ZeroError("its param group %d has %s %r, the wrapped optimizer %r (only "
                                "lr may differ)" % (n, key, theirs, value))
