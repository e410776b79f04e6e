"""One forward of a decoder-only transformer over a preallocated (static) KV cache, written
out step by step on top of the model's own modules.

The embeddings, norms, projections (LoRA adapters included), MLPs and rotary tables are the
loaded model's; the cache, the positions, the attention mask and the attention are ours. A
forward feeds ``B`` tokens after ``start`` cached positions into cache slots
``start .. start + B - 1``; it is handed the cache tensors, or a window of their first slots
that holds what it writes, and every shape depends only on ``B`` and that size, never on
``start``, so a compiled forward is reused at every position (and a CUDA graph replays).

The ``B`` tokens are a chain (an ordinary append: each follows the one before) or a tree
given by parent indices (a draft graph: each node follows its parent). For a tree the mask
and the position ids are built here, on the device, from the parents alone: a node sees the
whole cached prefix, its ancestors and itself, at position ``start + depth``.

A layer runs in three parts: :func:`before_attention` (norm, projections, rotary),
the cache write and attention, and :func:`after_attention` (output projection, MLP). The two
outer parts never see the cache, so their shapes depend on ``B`` alone: they are what a
compiler compiles once and reuses for every layer (regional compilation), while attention,
whose shapes follow the cache window, runs as written.

Uncompiled, a forward is a chain of small kernels, and at batch one on a GPU their number,
not the bytes they read, sets a step's time. Layers whose projections are plain linear
layers therefore run as :class:`FusedLayer`: the query, key and value projections are one
matrix product, so are the gate and up projections, norms are one fused kernel each, the
rotary embedding of every head is three, and attention's mask is built once per forward
rather than once per layer (:func:`fused_before_attention`,
:func:`fused_after_attention`). Layers with adapters or quantised projections keep the
per-module path. On a CPU in float32, the fused layers and the output projection multiply
with weights packed for oneDNN (:mod:`cad.selector.cpu_packing`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.nn import functional

from cad.selector import cpu_packing, gpu_kernels
from cad.selector.cpu_packing import PackedHead, linear

ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3")
MAX_TREE = 512
"""The largest tree (and chain chunk) one forward takes; ancestors are found in
``log2(MAX_TREE)`` pointer-jumping rounds."""
_JUMPS = (MAX_TREE - 1).bit_length()


class UnsupportedModel(ValueError):
    """The static-cache forward does not know this architecture."""


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def before_attention(
    layer: Any, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decoder layer up to attention: the input norm, the query/key/value projections
    (with the query and key norms of Qwen3) and the rotary embedding. ``hidden`` is ``(1, B,
    hidden)``, ``cos``/``sin`` ``(1, 1, B, D)``; returns query ``(1, heads, B, D)``, key and
    value ``(1, kv_heads, B, D)``."""
    attention = layer.self_attn
    x = layer.input_layernorm(hidden)
    shape = (1, hidden.shape[1], -1, head_dim)
    query = attention.q_proj(x).view(shape)
    key = attention.k_proj(x).view(shape)
    if hasattr(attention, "q_norm"):
        query, key = attention.q_norm(query), attention.k_norm(key)
    query, key = query.transpose(1, 2), key.transpose(1, 2)
    query = query * cos + _rotate_half(query) * sin
    key = key * cos + _rotate_half(key) * sin
    value = attention.v_proj(x).view(shape).transpose(1, 2)
    return query, key, value


def after_attention(layer: Any, hidden: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
    """The rest of a decoder layer: the attention output projection added to ``hidden``,
    then the MLP on its norm added again."""
    hidden = hidden + layer.self_attn.o_proj(mixed)
    return hidden + layer.mlp(layer.post_attention_layernorm(hidden))


@dataclass(frozen=True, eq=False)
class PackedProjections:
    """oneDNN's packed copies of a fused layer's four projection weights
    (:mod:`cad.selector.cpu_packing`)."""

    qkv: torch.Tensor
    out: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass(frozen=True, eq=False)
class FusedLayer:
    """One decoder layer's weights laid out for few kernels: the query, key and value
    projections stacked into one matrix (``qkv``, with ``qkv_bias``), the gate and up
    projections likewise (``gate_up``), and the norms' weights and epsilons. The layer's own
    projections are re-pointed at slices of the stacked matrices, so the weights are held
    once and the model's own forward still computes the same thing."""

    input_norm: torch.Tensor
    post_norm: torch.Tensor
    eps: float
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    query_size: int
    key_size: int
    out: torch.Tensor
    out_bias: torch.Tensor | None
    gate_up: torch.Tensor
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None
    query_norm: torch.Tensor | None = None
    key_norm: torch.Tensor | None = None
    head_norm_eps: float = 0.0
    packed: PackedProjections | None = None


SILU_MODULES = ("SiLU", "SiLUActivation")
"""The activation modules (PyTorch's and transformers') a fused layer computes as
``functional.silu``."""
_FUSED: weakref.WeakKeyDictionary[Any, FusedLayer] = weakref.WeakKeyDictionary()


def _plain_linear(module: Any) -> bool:
    return type(module) is torch.nn.Linear


def _stack(modules: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weights (and biases) of ``modules`` stacked row-wise, each module's parameters
    then made views of its rows (the storage is shared, nothing is held twice)."""
    with torch.no_grad():
        weight = torch.cat([m.weight for m in modules])
        biases = [m.bias for m in modules]
        bias = None if biases[0] is None else torch.cat(biases)
        first = 0
        for module in modules:
            rows = module.weight.shape[0]
            module.weight.data = weight[first : first + rows]
            if bias is not None:
                module.bias.data = bias[first : first + rows]
            first += rows
    return weight, bias


def _shares(module: Any, stacked: torch.Tensor) -> bool:
    return module.weight.untyped_storage().data_ptr() == stacked.untyped_storage().data_ptr()


def fusable(layer: Any) -> bool:
    """Whether :func:`fuse` can fuse ``layer``: every projection a plain linear layer (not an
    adapter, not quantised), the activation SiLU, and the biases alike in kind."""
    attention, mlp = layer.self_attn, layer.mlp
    if type(getattr(mlp, "act_fn", None)).__name__ not in SILU_MODULES:
        return False
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    feeds = (mlp.gate_proj, mlp.up_proj)
    if not all(map(_plain_linear, (*projections, *feeds, attention.o_proj, mlp.down_proj))):
        return False
    return len({p.bias is None for p in projections}) == 1 and (
        len({f.bias is None for f in feeds}) == 1
    )


def _projection_weights(layer: Any) -> list[torch.Tensor]:
    attention, mlp = layer.self_attn, layer.mlp
    modules = (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj)
    return [m.weight for m in (*modules, mlp.gate_proj, mlp.up_proj, mlp.down_proj)]


def fuse(layer: Any, *, packed: bool = False) -> FusedLayer | None:
    """``layer``'s :class:`FusedLayer` (made once and kept while the layer's weights stay
    where it put them), or ``None`` when it is not :func:`fusable`. ``packed``: with
    oneDNN's packed copies of its projections (:mod:`cad.selector.cpu_packing`)."""
    if not fusable(layer):
        return None
    attention, mlp = layer.self_attn, layer.mlp
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    feeds = (mlp.gate_proj, mlp.up_proj)
    known = _FUSED.get(layer)
    if (
        known is not None
        and _shares(attention.q_proj, known.qkv)
        and _shares(mlp.gate_proj, known.gate_up)
    ):
        if (known.packed is not None) == packed:
            return known
        fused = replace(known, packed=_pack(known) if packed else None)
        _FUSED[layer] = fused
        return fused
    qkv, qkv_bias = _stack(projections)
    gate_up, gate_up_bias = _stack(feeds)
    norms = {}
    if hasattr(attention, "q_norm"):
        norms = {
            "query_norm": attention.q_norm.weight,
            "key_norm": attention.k_norm.weight,
            "head_norm_eps": float(attention.q_norm.variance_epsilon),
        }
    fused = FusedLayer(
        input_norm=layer.input_layernorm.weight,
        post_norm=layer.post_attention_layernorm.weight,
        eps=float(layer.input_layernorm.variance_epsilon),
        qkv=qkv,
        qkv_bias=qkv_bias,
        query_size=attention.q_proj.weight.shape[0],
        key_size=attention.k_proj.weight.shape[0],
        out=attention.o_proj.weight,
        out_bias=attention.o_proj.bias,
        gate_up=gate_up,
        gate_up_bias=gate_up_bias,
        down=mlp.down_proj.weight,
        down_bias=mlp.down_proj.bias,
        **norms,
    )
    if packed:
        fused = replace(fused, packed=_pack(fused))
    _FUSED[layer] = fused
    return fused


def _pack(layer: FusedLayer) -> PackedProjections:
    return PackedProjections(
        qkv=cpu_packing.pack(layer.qkv),
        out=cpu_packing.pack(layer.out),
        gate_up=cpu_packing.pack(layer.gate_up),
        down=cpu_packing.pack(layer.down),
    )


def fused_before_attention(
    layer: FusedLayer, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`before_attention` for a :class:`FusedLayer`: one norm, one projection, and the
    rotary embedding of every head in three kernels. ``cos`` and ``sin`` are ``(1, B,
    heads + 2 * kv_heads, D)`` (:func:`rotary_tables`): ``sin`` with the first half of each
    head negated, so that rotating half of a head becomes a roll, and the value heads given
    ``cos = 1`` and ``sin = 0``, so that they pass through unchanged."""
    size = hidden.shape[1]
    x = functional.rms_norm(hidden, (hidden.shape[-1],), layer.input_norm, layer.eps)
    packed = _project(layer, "qkv", x).view(1, size, -1, head_dim)
    heads = layer.query_size // head_dim
    kv_heads = layer.key_size // head_dim
    if layer.query_norm is not None:
        packed = torch.cat(
            (
                functional.rms_norm(
                    packed[:, :, :heads], (head_dim,), layer.query_norm, layer.head_norm_eps
                ),
                functional.rms_norm(
                    packed[:, :, heads : heads + kv_heads],
                    (head_dim,),
                    layer.key_norm,
                    layer.head_norm_eps,
                ),
                packed[:, :, heads + kv_heads :],
            ),
            dim=2,
        )
    rolled = torch.roll(packed, head_dim // 2, dims=-1)
    packed = torch.addcmul(packed * cos, rolled, sin)
    query = packed[:, :, :heads].transpose(1, 2)
    key = packed[:, :, heads : heads + kv_heads].transpose(1, 2)
    value = packed[:, :, heads + kv_heads :].transpose(1, 2)
    return query, key, value


def fused_after_attention(
    layer: FusedLayer, hidden: torch.Tensor, mixed: torch.Tensor
) -> torch.Tensor:
    """:func:`after_attention` for a :class:`FusedLayer`: the gate and up projections are
    one matrix product (the activation is SiLU: :func:`fuse` takes no other), and the down
    projection adds itself to the residual inside its matrix product where its weight is
    not packed (one kernel for two: the residual is this function's own tensor)."""
    return _mlp_residual(layer, hidden + _project(layer, "out", mixed), swiglu)


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for the gate and up halves of ``gate_up``."""
    gate, up = gate_up.chunk(2, dim=-1)
    return functional.silu(gate) * up


def _mlp_residual(
    layer: FusedLayer, hidden: torch.Tensor, activate: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """The MLP of ``hidden``'s norm added to ``hidden`` (which the caller owns)."""
    x = functional.rms_norm(hidden, (hidden.shape[-1],), layer.post_norm, layer.eps)
    activated = activate(_project(layer, "gate_up", x))
    return _add_projection(layer, "down", hidden, activated)


def _add_projection(
    layer: FusedLayer, name: str, hidden: torch.Tensor, x: torch.Tensor
) -> torch.Tensor:
    """``hidden`` plus the layer's projection ``name`` of ``x``: inside the matrix product,
    in place, where the weight is not packed and has no bias (``hidden`` must be the
    caller's own tensor), else as a sum."""
    if layer.packed is not None or getattr(layer, f"{name}_bias") is not None:
        return hidden + _project(layer, name, x)
    width = hidden.shape[-1]
    hidden.view(-1, width).addmm_(x.view(-1, x.shape[-1]), getattr(layer, name).t())
    return hidden


def kernel_layer(
    parts: ModelParts,
    layer: FusedLayer,
    hidden: torch.Tensor,
    tables: tuple[torch.Tensor, torch.Tensor],
    cache: tuple[torch.Tensor, torch.Tensor],
    start: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """A whole :class:`FusedLayer` through the fused kernels of
    :mod:`cad.selector.gpu_kernels`: norm, query/key/value product, rotary embedding (after
    the per-head norms, where there are) with the cache write (one kernel), attention under
    the additive ``mask`` (two), the output projection added in place, the MLP with a
    one-kernel activation. ``tables`` are the model's rotary ``(cos, sin)``, ``cache`` the
    layer's keys and values window; ``hidden`` must be the caller's own tensor (it is
    updated in place)."""
    x = functional.rms_norm(hidden, (hidden.shape[-1],), layer.input_norm, layer.eps)
    keys, values = cache
    packed = _project(layer, "qkv", x)
    heads = (parts.num_heads, parts.num_kv_heads)
    norms = None
    if layer.query_norm is not None and layer.key_norm is not None:
        norms = (layer.query_norm, layer.key_norm, layer.head_norm_eps)
    query = gpu_kernels.rotary_into_cache(packed, *tables, keys, values, start, *heads, norms)
    mixed = gpu_kernels.masked_attention(query, keys, values, mask, parts.scale)
    hidden = _add_projection(layer, "out", hidden, mixed)
    return _mlp_residual(layer, hidden, gpu_kernels.silu_mul)


def _project(layer: FusedLayer, name: str, x: torch.Tensor) -> torch.Tensor:
    """The layer's projection ``name`` (``qkv``, ``out``, ``gate_up``, ``down``) of ``x``,
    through its packed copy when it has one."""
    packed = None if layer.packed is None else getattr(layer.packed, name)
    return linear(x, getattr(layer, name), getattr(layer, f"{name}_bias"), packed)


def rotary_tables(
    parts: ModelParts, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary model's ``(1, B, D)`` tables shaped for a layer: ``(1, 1, B, D)`` for the
    per-module path (heads first); for fused layers ``(1, B, heads + 2 * kv_heads, D)``, one
    row per projected head, as :func:`fused_before_attention` takes them. Built once per
    forward."""
    if not parts.fused:
        return cos[:, None], sin[:, None]
    size, dim = cos.shape[1], cos.shape[2]
    half = dim // 2
    signed = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
    rotated = (1, size, parts.num_heads + parts.num_kv_heads, dim)
    passed = (1, size, parts.num_kv_heads, dim)
    return (
        torch.cat((cos[:, :, None].expand(rotated), cos.new_ones(passed)), dim=2),
        torch.cat((signed[:, :, None].expand(rotated), sin.new_zeros(passed)), dim=2),
    )


@dataclass(frozen=True)
class ModelParts:
    """The modules one forward runs through, the attention shape, and the functions that run
    a layer's parts around attention (compiled versions replace them under ``--compile``)."""

    embed: Any
    layers: Any
    norm: Any
    rotary: Any
    head: Any
    num_heads: int
    num_kv_heads: int
    head_dim: int
    scale: float
    fused: bool = False
    packed: bool = False
    triton: bool = False
    before: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = before_attention
    after: Callable[..., torch.Tensor] = after_attention

    @classmethod
    def of(cls, model: Any, *, pack: bool = True, triton: bool = False) -> ModelParts:
        """The parts of a causal LM (a PEFT wrapper is looked through); raises
        :class:`UnsupportedModel` for architectures whose layers this forward does not
        reproduce (sliding windows, dynamic rotary scaling, other block layouts). Its
        layers are :class:`FusedLayer` when every one of them can be fused; ``pack``
        allows oneDNN's packed copies of their weights where :meth:`would_pack` says so (a
        compiler cannot take them); ``triton`` runs forwards of up to
        :data:`GROUPED_MATMUL_MAX` tokens through the fused kernels of
        :mod:`cad.selector.gpu_kernels` where :func:`~cad.selector.gpu_kernels.usable` says
        they can run the fused layers."""
        network = _supported_network(model)
        config = network.config
        body = network.model
        attention = body.layers[0].self_attn
        heads = config.num_attention_heads
        every = all(map(fusable, body.layers))
        head = network.lm_head
        packed = pack and every and _packing_wanted(network)
        fused = [fuse(layer, packed=packed) for layer in body.layers] if every else []
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        triton = triton and every and gpu_kernels.usable(head_dim)
        return cls(
            embed=body.embed_tokens,
            layers=fused if every else body.layers,
            norm=body.norm,
            rotary=body.rotary_emb,
            head=PackedHead(head) if packed else head,
            num_heads=heads,
            num_kv_heads=config.num_key_value_heads,
            head_dim=head_dim,
            scale=float(attention.scaling),
            fused=every,
            packed=packed,
            triton=triton,
            before=fused_before_attention if every else before_attention,
            after=fused_after_attention if every else after_attention,
        )

    @staticmethod
    def would_pack(model: Any) -> bool:
        """Whether :meth:`of` would pack ``model``'s weights: a supported architecture whose
        layers can all be fused, a plain output projection, and
        :func:`cpu_packing.packing_wanted` agreeing. Asked before building the parts, it
        spares fusing a model that would then not be packed."""
        try:
            network = _supported_network(model)
        except UnsupportedModel:
            return False
        return all(map(fusable, network.model.layers)) and _packing_wanted(network)


def _packing_wanted(network: Any) -> bool:
    """Whether the fusable layers of ``network`` and its output projection (if a plain
    linear layer) should be packed: :func:`cpu_packing.packing_wanted` on their weights."""
    layers, head = network.model.layers, network.lm_head
    return _plain_linear(head) and cpu_packing.packing_wanted(
        [w for layer in layers for w in _projection_weights(layer)] + [head.weight]
    )


def _supported_network(model: Any) -> Any:
    """The causal LM under ``model`` (a PEFT wrapper is looked through), or
    :class:`UnsupportedModel` for architectures whose layers this forward does not reproduce."""
    network = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = network.config
    kind = getattr(config, "model_type", "?")
    if kind not in ARCHITECTURES:
        raise UnsupportedModel(
            f"the static-cache runtime supports {', '.join(ARCHITECTURES)} models, not {kind}"
        )
    if any(layer != "full_attention" for layer in getattr(config, "layer_types", None) or []):
        raise UnsupportedModel(f"{kind} with sliding-window layers is not supported")
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("rope_type", "default") in ("dynamic", "longrope"):
        raise UnsupportedModel(f"rotary scaling {rope['rope_type']!r} is not supported")
    return network


def chain_layout(
    start: torch.Tensor, size: int, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``(1, size)`` and visibility ``(size, capacity)`` of ``size`` tokens appended
    in order after ``start`` cached ones: causal over the cache."""
    positions = start + torch.arange(size, device=start.device)
    slots = torch.arange(capacity, device=start.device)
    return positions[None], slots[None, :] <= positions[:, None]


def _ancestors(parents: torch.Tensor) -> torch.Tensor:
    """``(B, B)``: whether node ``j`` is node ``i`` or one of its ancestors, for a tree in
    topological order (``parents[i] < i``, ``-1`` for a root). Found by pointer jumping:
    after round ``r`` every node knows its ancestors up to ``2**r`` steps up."""
    size = parents.shape[0]
    nodes = torch.arange(size, device=parents.device)
    up = torch.where(parents < 0, nodes, parents)
    ancestors = (nodes[None, :] == nodes[:, None]) | (nodes[None, :] == up[:, None])
    for _ in range(_JUMPS):
        ancestors = ancestors | ancestors[up]
        up = up[up]
    return ancestors


def host_start(start: torch.Tensor) -> int | None:
    """``start`` as a host integer where reading it costs nothing and changes no graph
    (eager on a CPU); ``None`` on a device or while compiling, where it stays a tensor."""
    if start.is_cpu and not torch.compiler.is_compiling():
        return int(start)
    return None


def tree_layout(
    parents: torch.Tensor, start: torch.Tensor, capacity: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``(1, B)`` and visibility ``(B, capacity)`` of a tree of ``B`` nodes in
    topological order fed after ``start`` cached tokens (``parents[i] < i``, ``-1`` for a
    root). On the device ``start`` stays a tensor (a graph or compiled code serves every
    position) and the tree's columns are gathered; eager on a CPU they are written in place,
    a third of the time."""
    size = parents.shape[0]
    ancestors = _ancestors(parents)
    depth = ancestors.sum(dim=1) - 1
    first = host_start(start)
    if first is not None:
        allowed = torch.empty((size, capacity), dtype=torch.bool)
        allowed[:, :first] = True
        allowed[:, first : first + size] = ancestors
        allowed[:, first + size :] = False
        return (start + depth)[None], allowed
    slots = torch.arange(capacity, device=parents.device)
    offset = slots - start
    inside = (offset >= 0) & (offset < size)
    tree = ancestors[:, offset.clamp(0, size - 1)] & inside[None, :]
    return (start + depth)[None], tree | (slots < start)[None, :]


GROUPED_MATMUL_MAX = 128
"""The widest forward whose attention is written as grouped matrix products on a GPU, and
on a CPU in bfloat16 or float16 the most query rows one grouped product takes (wider
forwards there go in blocks of this many rows); elsewhere wider forwards use PyTorch's
fused attention."""
LOW_PRECISION = (torch.bfloat16, torch.float16)
"""Cache dtypes whose forwards attend through grouped products with a softmax in that dtype
on a CPU (see :func:`attend`)."""


@dataclass(frozen=True)
class Visibility:
    """What the ``B`` fed tokens may attend to over ``S`` cache slots, in the form each
    attention kernel takes: a boolean ``(B, S)``; for the grouped matrix products around a
    float32 softmax, an additive float32 ``(B, S)`` mask (0 or ``-inf``); for those in the
    weights' own precision (a CPU in bfloat16), the blocked slots from slot ``first`` on,
    ``~allowed[:, first:]`` (every slot before the fed tokens' first is visible to all of
    them, so only the rest needs a mask). Built once per forward."""

    allowed: torch.Tensor
    additive: torch.Tensor | None
    blocked: torch.Tensor | None = None
    first: int = 0

    @classmethod
    def of(
        cls,
        allowed: torch.Tensor,
        dtype: torch.dtype = torch.float32,
        first: int | None = None,
        *,
        additive: bool = False,
    ) -> Visibility:
        """The masks for ``allowed`` over a cache of ``dtype``; the additive one (always
        with ``additive``: the fused kernels take it) or the blocked slots only where
        :func:`attend` uses them. ``first``: the slot of the first fed token, where known on
        the host (eager on a CPU); a forward wider than :data:`GROUPED_MATMUL_MAX` needs it
        for the grouped products."""
        size = allowed.shape[0]
        if additive or size == 1 or (allowed.is_cuda and size <= GROUPED_MATMUL_MAX):
            additive = torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device)
            additive.masked_fill_(~allowed, float("-inf"))
            return cls(allowed, additive)
        if dtype in LOW_PRECISION and not allowed.is_cuda:
            if first is not None:
                return cls(allowed, None, ~allowed[:, first:], first)
            if size <= GROUPED_MATMUL_MAX:
                return cls(allowed, None, ~allowed)
        return cls(allowed, None)


def attend(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    visible: Visibility,
    scale: float,
) -> torch.Tensor:
    """Attention of ``query`` ``(1, heads, B, D)`` over the cache (or its window) ``(1,
    kv_heads, S, D)`` where ``visible`` allows; grouped-query heads share their key/value
    head without copying it. Returns ``(1, B, heads * D)``.

    The decode step, and on a GPU every forward up to :data:`GROUPED_MATMUL_MAX` tokens, is
    written as two matrix products around a float32 softmax, five kernels reading the window
    once (PyTorch's fused attention takes no boolean mask together with grouped heads on a
    GPU, and falls back to copying every key/value head). On a CPU in bfloat16 every forward
    is two matrix products around a softmax in the weights' precision (scores rounded to
    bfloat16, as the GPU's products round them), the mask applied only to the fed tokens'
    own slots, and a wider forward (a prompt's chunks) in blocks of
    :data:`GROUPED_MATMUL_MAX` query rows, each over the slots up to its last row's: a fed
    token sees no later one. PyTorch's fused CPU attention runs far below the bfloat16
    products' rate: this form takes a half to three quarters of its time for 8 to 128 tokens
    over a few thousand slots, and about a third for a 512-token chunk. Elsewhere wider
    inputs use the fused attention."""
    _, heads, size, dim = query.shape
    if visible.additive is not None:
        return _grouped(query, keys, values, scale, additive=visible.additive)
    blocked, first = visible.blocked, visible.first
    if blocked is not None and size <= GROUPED_MATMUL_MAX:
        return _grouped(query, keys, values, scale, blocked=blocked, first=first)
    if blocked is not None:
        pieces = []
        for low in range(0, size, GROUPED_MATMUL_MAX):
            high = min(size, low + GROUPED_MATMUL_MAX)
            end = first + high
            rows = query[:, :, low:high]
            mask = blocked[low:high, :high]
            pieces.append(
                _grouped(
                    rows, keys[:, :, :end], values[:, :, :end], scale, blocked=mask, first=first
                )
            )
        return torch.cat(pieces, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        keys,
        values,
        attn_mask=visible.allowed[None, None],
        scale=scale,
        enable_gqa=True,
    )
    return out.transpose(1, 2).reshape(1, size, heads * dim)


def _grouped(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    scale: float,
    *,
    additive: torch.Tensor | None = None,
    blocked: torch.Tensor | None = None,
    first: int = 0,
) -> torch.Tensor:
    """Attention as two grouped matrix products (the heads sharing a key/value head stacked
    as rows of one product) around a softmax: in float32 with the ``additive`` mask, or in
    the scores' own precision with the ``blocked`` slots from slot ``first`` on set to
    ``-inf``. Returns ``(1, B, heads * D)``."""
    _, heads, size, dim = query.shape
    kv_heads = keys.shape[1]
    groups = heads // kv_heads
    scaled = query if blocked is None else query * scale
    grouped = scaled.reshape(1, kv_heads, groups * size, dim)
    scores = torch.matmul(grouped, keys.transpose(-1, -2)).view(1, kv_heads, groups, size, -1)
    if blocked is None:
        weights = torch.softmax(torch.add(additive, scores, alpha=scale), dim=-1)
    else:
        scores[..., first:].masked_fill_(blocked, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights.to(values.dtype).view(1, kv_heads, groups * size, -1), values)
    return out.view(1, heads, size, dim).transpose(1, 2).reshape(1, size, heads * dim)


def forward(
    parts: ModelParts,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    tokens: torch.Tensor,
    start: torch.Tensor,
    parents: torch.Tensor | None = None,
) -> torch.Tensor:
    """Feed ``tokens`` ``(1, B)`` after ``start`` (a 0-d tensor) cached positions, writing
    their keys and values into slots ``start .. start + B - 1`` of every layer's ``keys`` /
    ``values`` ``(1, kv_heads, capacity, D)``; a chain when ``parents`` is ``None``, else the
    tree it describes. Returns the final-norm hidden states ``(B, hidden)``."""
    size = tokens.shape[1]
    capacity = keys[0].shape[2]
    if parents is None:
        positions, allowed = chain_layout(start, size, capacity)
    else:
        positions, allowed = tree_layout(parents, start, capacity)
    kernels = parts.triton and size <= GROUPED_MATMUL_MAX
    visible = Visibility.of(allowed, keys[0].dtype, host_start(start), additive=kernels)
    hidden = parts.embed(tokens)
    tables = parts.rotary(hidden, positions)
    if kernels:
        for index, layer in enumerate(parts.layers):
            cache = (keys[index], values[index])
            hidden = kernel_layer(parts, layer, hidden, tables, cache, start, visible.additive)
        return parts.norm(hidden)[0]
    cos, sin = rotary_tables(parts, *tables)
    slots = start + torch.arange(size, device=tokens.device)
    for index, layer in enumerate(parts.layers):
        query, key, value = parts.before(layer, hidden, cos, sin, parts.head_dim)
        keys[index].index_copy_(2, slots, key)
        values[index].index_copy_(2, slots, value)
        mixed = attend(query, keys[index], values[index], visible, parts.scale)
        hidden = parts.after(layer, hidden, mixed)
    return parts.norm(hidden)[0]


def forward_last(
    parts: ModelParts,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    tokens: torch.Tensor,
    start: torch.Tensor,
    last: torch.Tensor,
) -> torch.Tensor:
    """A chain forward that returns only the next-token logits ``(vocab,)`` after position
    ``last`` (a 1-element index: the chain's real end when it is padded)."""
    hidden = forward(parts, keys, values, tokens, start)
    return parts.head(hidden.index_select(0, last))[0].float()


def compact(
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    source: torch.Tensor,
    target: torch.Tensor,
) -> None:
    """Move every layer's cache slots ``source`` to slots ``target`` (equal lengths),
    reading all of them before writing any: the kept path of a draft tree, in place."""
    for layer in (*keys, *values):
        layer.index_copy_(2, target, layer.index_select(2, source))
