"""A model zoo: the layer shapes of well-known networks, at batch 1.

Networks (``networks()`` lists them):

=======================  ==================================================================
name                     what
=======================  ==================================================================
``resnet50``             ResNet-50 v1.5 at 224x224: conv1, every bottleneck conv, fc1000
``vgg16``                VGG-16 (configuration D) at 224x224: 13 convs and 3 fc layers
``mobilenet_v2``         MobileNet-V2 (width 1.0) at 224x224: every conv incl. depthwise
``bert_base_128``        one BERT-base encoder layer at sequence length 128
``bert_base_512``        the same at sequence length 512
``gpt_decoder_prefill``  one LLaMA-2-7B-class decoder block, prefill of 2048 tokens
``gpt_decoder_decode``   the same block decoding 1 token against a 2048-entry KV cache
=======================  ==================================================================

Layer naming and ``repeat``. A network lists each distinct layer once; ``Problem.repeat``
says how many times that layer occurs in the network, so ``Network.total_macs`` (the sum
of ``macs * repeat``) is the MAC count of the whole network. Two entries may still share a
shape when they play different roles (ResNet-50's ``res2a_branch1`` shortcut and
``res2a_branch2c`` expand 1x1 are both 64 -> 256 at 56x56; VGG-16's conv5_1..conv5_3).
``Network.unique_shapes()`` merges those (ResNet-50: 25 entries, 24 shapes; VGG-16: 16
and 12; MobileNet-V2: 38 and 31), keeping every old name as an alias.

* ResNet-50 uses the names of the original Caffe release (``res{stage}{block}_branch2a``
  1x1 reduce, ``..._branch2b`` 3x3, ``..._branch2c`` 1x1 expand, ``..._branch1`` projection
  shortcut). Blocks b, c, ... of a stage share shapes, so they appear once under the name
  of the first of them (``res3b_branch2a``, repeat 3, covers res3b, res3c and res3d).
  Aliases: ``conv{S}_1`` is the 3x3 conv of the first block of stage S (stride 2 for
  S >= 3), ``conv{S}_2`` the 3x3 conv of the other blocks; ``fc`` is ``fc1000``.
* VGG-16 lists all 16 layers by their paper names (``conv1_1`` ... ``conv5_3``, ``fc6``
  ... ``fc8``), each with repeat 1.
* MobileNet-V2: ``conv1`` (3x3/2 stem), then ``block{i}_{j}_{expand|dw|project}`` for
  bottleneck sequence i (the rows of Table 2 of the paper) and block j; blocks 2..n of a
  sequence share shapes and appear once as ``block{i}_2_*`` with repeat n-1; then
  ``conv_last`` (1x1 to 1280) and ``fc``.
* Transformers: ``qkv_proj`` (repeat 3: Q, K and V), ``attn_qk`` (Q K^T over the heads),
  ``attn_av`` (softmax(.) V), ``attn_out``, and the FFN (``ffn_up``/``ffn_down``; the
  gated FFN of the decoder block has ``ffn_gate_up`` with repeat 2). Causal attention is
  counted dense (the masked half is computed, as most kernels do).

Qualified names are ``"network/layer"`` (``layer("resnet50/res3a_branch2b")``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

from accelmap._registry import did_you_mean
from accelmap.errors import SpecError, UnknownPluginError
from accelmap.workloads.builders import (
    batched_matmul,
    conv2d,
    fully_connected,
    matmul,
    pointwise,
)
from accelmap.workloads.problem import Problem

__all__ = ["Network", "networks", "network", "layer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    """A named sequence of distinct layers.

    Attributes
    ----------
    name
        Network name as listed by :func:`networks`.
    description
        One line: what the network is, its input size, where the shapes come from.
    layers
        Distinct layers in network order; ``layer.repeat`` counts its occurrences.
    aliases
        ``(alias, layer name)`` pairs accepted by :meth:`layer`.
    """

    name: str
    description: str
    layers: tuple[Problem, ...]
    aliases: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        names = [p.name for p in self.layers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpecError(f"network {self.name}: duplicate layer names {dup}")
        bad = [a for a, target in self.aliases if target not in names or a in names]
        if bad:
            raise SpecError(f"network {self.name}: aliases {bad} clash with or point at no layer")

    @property
    def total_macs(self) -> int:
        """MACs of the whole network: sum of ``macs * repeat`` over its layers."""
        return sum(p.macs * p.repeat for p in self.layers)

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.layers)

    def unique_shapes(self) -> Network:
        """The same network with layers of identical shape merged (repeats summed).

        The first layer of each shape keeps its name; the names of the merged layers
        become aliases of it, so every name that worked before still resolves. Use this
        to search each distinct shape once (VGG-16's 16 layers are 12 shapes).
        """
        merged: dict[tuple[object, object], Problem] = {}
        renamed: dict[str, str] = {}
        for p in self.layers:
            key = (p.dims, p.tensors)
            first = merged.get(key)
            if first is None:
                merged[key] = p
            else:
                merged[key] = replace(first, repeat=first.repeat + p.repeat)
                renamed[p.name] = first.name
        aliases = [(a, renamed.get(t, t)) for a, t in self.aliases] + sorted(renamed.items())
        return Network(
            name=self.name,
            description=self.description,
            layers=tuple(merged.values()),
            aliases=tuple(aliases),
        )

    def layer(self, name: str) -> Problem:
        """The layer called ``name`` (or an alias of it)."""
        target = dict(self.aliases).get(name, name)
        for p in self.layers:
            if p.name == target:
                return p
        known = list(self.layer_names) + [a for a, _ in self.aliases]
        raise UnknownPluginError(did_you_mean(name, known, what=f"layer of network {self.name}"))


# --- ResNet-50 ----------------------------------------------------------------------------
def _resnet50() -> Network:
    # He et al., "Deep Residual Learning for Image Recognition", CVPR 2016, Table 1: a 7x7/2
    # stem, 3x3/2 max pool, then 3, 4, 6, 3 bottleneck blocks (1x1 reduce, 3x3, 1x1 expand
    # to 4x the width) at 56, 28, 14, 7 pixels with widths 64, 128, 256, 512. Version 1.5
    # (torchvision's and NVIDIA's reference model) puts the stride 2 of stages 3-5 on the
    # 3x3 conv instead of the first 1x1; that is the ~4.1 GMAC model most papers quote.
    layers = [conv2d("conv1", c=3, k=64, p=112, q=112, r=7, s=7, stride=2, padding=3, input_hw=(224, 224))]
    aliases: list[tuple[str, str]] = []
    c_in = 64  # channels after the max pool
    for stage, (width, blocks, size) in enumerate(
        ((64, 3, 56), (128, 4, 28), (256, 6, 14), (512, 3, 7)), start=2
    ):
        out = 4 * width
        stride = 1 if stage == 2 else 2
        size_in = size * stride
        a = f"res{stage}a"
        layers += [
            pointwise(f"{a}_branch2a", c=c_in, k=width, p=size_in, q=size_in),
            # In stage 2 every block's 3x3 has the same shape, so one entry covers all.
            conv2d(f"{a}_branch2b", c=width, k=width, p=size, q=size, r=3, s=3, stride=stride,
                   padding=1, input_hw=(size_in, size_in), repeat=blocks if stage == 2 else 1),
            pointwise(f"{a}_branch2c", c=width, k=out, p=size, q=size, repeat=blocks),
            pointwise(f"{a}_branch1", c=c_in, k=out, p=size, q=size, stride=stride),
            pointwise(f"res{stage}b_branch2a", c=out, k=width, p=size, q=size, repeat=blocks - 1),
        ]  # fmt: skip
        aliases.append((f"conv{stage}_1", f"{a}_branch2b"))
        if stage == 2:
            aliases.append(("conv2_2", f"{a}_branch2b"))
        else:
            layers.append(
                conv2d(f"res{stage}b_branch2b", c=width, k=width, p=size, q=size, r=3, s=3,
                       padding=1, repeat=blocks - 1)
            )  # fmt: skip
            aliases.append((f"conv{stage}_2", f"res{stage}b_branch2b"))
        c_in = out
    layers.append(fully_connected("fc1000", n=1, c=2048, k=1000))
    aliases.append(("fc", "fc1000"))
    return Network(
        name="resnet50",
        description="ResNet-50 v1.5 (He et al. 2016; stride on the 3x3 conv), 224x224, batch 1",
        layers=tuple(layers),
        aliases=tuple(aliases),
    )


# --- VGG-16 -------------------------------------------------------------------------------
def _vgg16() -> Network:
    # Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
    # Recognition", ICLR 2015, Table 1 configuration D: 3x3 convs, stride 1, padding 1,
    # 2x2/2 max pools between the five groups; fc 25088 (7x7x512) -> 4096 -> 4096 -> 1000.
    layers: list[Problem] = []
    c_in = 3
    for group, (width, n_convs, size) in enumerate(
        ((64, 2, 224), (128, 2, 112), (256, 3, 56), (512, 3, 28), (512, 3, 14)), start=1
    ):
        for i in range(1, n_convs + 1):
            layers.append(conv2d(f"conv{group}_{i}", c=c_in, k=width, p=size, q=size, r=3, s=3, padding=1))
            c_in = width
    layers += [
        fully_connected("fc6", n=1, c=7 * 7 * 512, k=4096),
        fully_connected("fc7", n=1, c=4096, k=4096),
        fully_connected("fc8", n=1, c=4096, k=1000),
    ]
    return Network(
        name="vgg16",
        description="VGG-16 configuration D (Simonyan & Zisserman 2015), 224x224, batch 1",
        layers=tuple(layers),
    )


# --- MobileNet-V2 -------------------------------------------------------------------------
def _mobilenet_v2() -> Network:
    # Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", CVPR 2018,
    # Table 2 (t expansion, c channels, n blocks, s stride of the first block) and Table 1
    # (a block: 1x1 expand to t*c_in, 3x3 depthwise with the stride, 1x1 linear project).
    # Width multiplier 1.0; the stride sits on the depthwise conv; 3x3 convs pad 1.
    table2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
              (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip
    layers = [conv2d("conv1", c=3, k=32, p=112, q=112, r=3, s=3, stride=2, padding=1, input_hw=(224, 224))]
    c_in, size = 32, 112
    for seq, (t, c, n, s) in enumerate(table2, start=1):
        for j, repeat in ((1, 1), (2, n - 1)):
            if repeat == 0:
                continue
            stride = s if j == 1 else 1
            size_out = size // stride
            hidden = t * c_in
            prefix = f"block{seq}_{j}"
            if t != 1:
                layers.append(pointwise(f"{prefix}_expand", c=c_in, k=hidden, p=size, q=size, repeat=repeat))
            layers.append(
                conv2d(f"{prefix}_dw", c=hidden, k=hidden, p=size_out, q=size_out, r=3, s=3,
                       stride=stride, groups=hidden, padding=1, input_hw=(size, size), repeat=repeat)
            )  # fmt: skip
            layers.append(
                pointwise(f"{prefix}_project", c=hidden, k=c, p=size_out, q=size_out, repeat=repeat)
            )
            c_in, size = c, size_out
    layers += [
        pointwise("conv_last", c=320, k=1280, p=7, q=7),
        fully_connected("fc", n=1, c=1280, k=1000),
    ]
    return Network(
        name="mobilenet_v2",
        description="MobileNet-V2 1.0 (Sandler et al. 2018), 224x224, batch 1",
        layers=tuple(layers),
    )


# --- Transformers -------------------------------------------------------------------------
def _attention_block(
    *, seq_q: int, seq_kv: int, d_model: int, heads: int, ffn: int, gated: bool
) -> tuple[Problem, ...]:
    """One transformer block as matmuls: projections as (tokens x d_model) GEMMs, attention
    as matmuls batched over the heads (Vaswani et al., "Attention Is All You Need", 2017)."""
    d_head = d_model // heads
    layers = [
        matmul("qkv_proj", m=seq_q, n=d_model, k=d_model, repeat=3),
        batched_matmul("attn_qk", b=heads, m=seq_q, n=seq_kv, k=d_head),
        batched_matmul("attn_av", b=heads, m=seq_q, n=d_head, k=seq_kv),
        matmul("attn_out", m=seq_q, n=d_model, k=d_model),
    ]
    if gated:
        layers.append(matmul("ffn_gate_up", m=seq_q, n=ffn, k=d_model, repeat=2))
    else:
        layers.append(matmul("ffn_up", m=seq_q, n=ffn, k=d_model))
    layers.append(matmul("ffn_down", m=seq_q, n=d_model, k=ffn))
    return tuple(layers)


def _bert_base(seq: int) -> Network:
    # Devlin et al., "BERT", NAACL 2019: BERT-base has L=12 layers, H=768, A=12 heads (64
    # wide), FFN 4H = 3072. One encoder layer; the whole encoder is 12 of them.
    return Network(
        name=f"bert_base_{seq}",
        description=f"one BERT-base encoder layer (Devlin et al. 2019; H=768, 12 heads, FFN 3072), "
        f"sequence {seq}, batch 1; the full encoder is 12 such layers",
        layers=_attention_block(seq_q=seq, seq_kv=seq, d_model=768, heads=12, ffn=3072, gated=False),
    )


# Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models", 2023, Table/appendix:
# the 7B model has d_model 4096, 32 heads of 128 (no grouped-query attention at 7B), a SwiGLU
# FFN of hidden size 11008 (gate, up and down projections), 32 layers, context 4096.
_GPT = {"d_model": 4096, "heads": 32, "ffn": 11008, "gated": True}
_GPT_CONTEXT = 2048


def _gpt_prefill() -> Network:
    return Network(
        name="gpt_decoder_prefill",
        description=f"one LLaMA-2-7B-class decoder block (d_model 4096, 32 heads, SwiGLU FFN 11008), "
        f"prefill of {_GPT_CONTEXT} tokens, batch 1; causal attention counted dense",
        layers=_attention_block(seq_q=_GPT_CONTEXT, seq_kv=_GPT_CONTEXT, **_GPT),  # type: ignore[arg-type]
    )


def _gpt_decode() -> Network:
    return Network(
        name="gpt_decoder_decode",
        description=f"one LLaMA-2-7B-class decoder block decoding 1 token against a KV cache of "
        f"{_GPT_CONTEXT} positions, batch 1 (every projection is a matrix-vector product)",
        layers=_attention_block(seq_q=1, seq_kv=_GPT_CONTEXT, **_GPT),  # type: ignore[arg-type]
    )


_NETWORKS: dict[str, Callable[[], Network]] = {
    "resnet50": _resnet50,
    "vgg16": _vgg16,
    "mobilenet_v2": _mobilenet_v2,
    "bert_base_128": lambda: _bert_base(128),
    "bert_base_512": lambda: _bert_base(512),
    "gpt_decoder_prefill": _gpt_prefill,
    "gpt_decoder_decode": _gpt_decode,
}


def networks() -> list[str]:
    """Names of the zoo's networks, in a stable order."""
    return list(_NETWORKS)


@cache
def network(name: str) -> Network:
    """The network called ``name``.

    Raises
    ------
    UnknownPluginError
        For an unknown name, with close matches and the list of networks.

    Examples
    --------
    >>> net = network("resnet50")
    >>> round(net.total_macs / 1e9, 2)
    4.09
    """
    build = _NETWORKS.get(name)
    if build is None:
        raise UnknownPluginError(did_you_mean(name, networks(), what="zoo network"))
    return build()


def layer(qualified: str) -> Problem:
    """One layer by its qualified name ``"network/layer"``.

    Examples
    --------
    >>> layer("resnet50/conv3_1").describe()
    'res3a_branch2b: N=1 K=128 C=128 P=28 Q=28 R=3 S=3  (115,605,504 MACs)'
    """
    net_name, sep, layer_name = qualified.partition("/")
    if not sep or not layer_name:
        raise UnknownPluginError(
            f"zoo layer {qualified!r}: expected 'network/layer', e.g. 'resnet50/conv1'. "
            f"Networks: {', '.join(networks())}."
        )
    return network(net_name).layer(layer_name)
