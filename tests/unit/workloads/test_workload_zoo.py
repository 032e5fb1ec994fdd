"""The model zoo: every network loads, layers validate, MAC totals match published figures."""

from __future__ import annotations

import pytest

from accelmap.errors import UnknownPluginError
from accelmap.workloads import Problem, layer, network, networks


def test_networks_listed():
    assert networks() == [
        "resnet50", "vgg16", "mobilenet_v2", "bert_base_128", "bert_base_512",
        "gpt_decoder_prefill", "gpt_decoder_decode",
    ]  # fmt: skip


@pytest.mark.parametrize("name", networks())
def test_every_network_loads(name):
    net = network(name)
    assert net.name == name and net.description
    assert net.layers and all(isinstance(p, Problem) for p in net.layers)
    for p in net.layers:
        assert p.macs > 0 and p.repeat >= 1
        assert (p.tensor_sizes() > 0).all()
        assert layer(f"{name}/{p.name}") is p
    assert net.total_macs == sum(p.macs * p.repeat for p in net.layers)
    hash(net)  # frozen specs key caches


def test_resnet50_total_macs():
    # torchvision's ResNet-50 (v1.5) is quoted at 4.09 GMACs at 224x224; the exact count of
    # its 53 convs and fc, from the layer table, is 4,089,184,256.
    net = network("resnet50")
    assert net.total_macs == 4_089_184_256
    assert sum(p.repeat for p in net.layers) == 54  # 53 convs + fc
    assert net.layer("fc1000").macs == 2048 * 1000


def test_vgg16_and_mobilenet_v2_totals():
    # Published figures: VGG-16 15.47 GMACs; MobileNet-V2 ~300 M multiply-adds (paper Table 3).
    vgg = network("vgg16")
    assert vgg.total_macs == 15_470_264_320
    assert len(vgg.layers) == 16
    mb = network("mobilenet_v2")
    assert mb.total_macs == 300_774_272
    n_dw = sum(p.repeat for p in mb.layers if p.name.endswith("_dw"))
    assert n_dw == 17  # one depthwise conv per bottleneck block
    dw = mb.layer("block3_1_dw")
    assert "K" not in dw.dim_names


def test_transformer_shapes():
    bert = network("bert_base_128")
    assert bert.total_macs == 128 * (4 * 768 * 768 + 2 * 768 * 3072) + 2 * 12 * 128 * 128 * 64
    qk = bert.layer("attn_qk")
    assert dict(zip(qk.dim_names, qk.bounds.tolist(), strict=True)) == {"B": 12, "M": 128, "N": 128, "K": 64}
    av = network("bert_base_512").layer("attn_av")
    assert dict(zip(av.dim_names, av.bounds.tolist(), strict=True)) == {"B": 12, "M": 512, "N": 64, "K": 512}
    dec = network("gpt_decoder_decode")
    assert all(dict(zip(p.dim_names, p.bounds.tolist(), strict=True))["M"] == 1 for p in dec.layers)
    assert dec.layer("attn_qk").bounds.tolist() == [32, 1, 2048, 128]
    pre = network("gpt_decoder_prefill")
    assert pre.layer("ffn_gate_up").repeat == 2
    # Prefill is 2048 decode steps' worth of work when attention is counted dense.
    assert pre.total_macs == 2048 * dec.total_macs


def test_resnet_aliases():
    p = layer("resnet50/conv3_1")
    assert p.name == "res3a_branch2b"
    b = dict(zip(p.dim_names, p.bounds.tolist(), strict=True))
    assert (b["R"], b["S"], b["C"], b["P"]) == (3, 3, 128, 28)
    assert layer("resnet50/conv2_2").name == "res2a_branch2b"
    assert layer("resnet50/conv5_2").repeat == 2
    assert layer("resnet50/fc").name == "fc1000"


def test_unknown_names_suggest():
    with pytest.raises(UnknownPluginError, match="Did you mean 'resnet50'"):
        network("resnet5O")
    with pytest.raises(UnknownPluginError, match="Did you mean .*'conv1_1'"):
        layer("vgg16/conv1_l")
    with pytest.raises(UnknownPluginError, match="expected 'network/layer'"):
        layer("resnet50")


@pytest.mark.parametrize("name", networks())
def test_unique_shapes_keeps_totals_and_names(name):
    net = network(name)
    uniq = net.unique_shapes()
    assert uniq.total_macs == net.total_macs
    keys = [(p.dims, p.tensors) for p in uniq.layers]
    assert len(set(keys)) == len(keys)
    for p in net.layers:  # every old name resolves to a layer of the same shape
        q = uniq.layer(p.name)
        assert (q.dims, q.tensors) == (p.dims, p.tensors)
    for alias, _ in net.aliases:
        assert uniq.layer(alias).dims == net.layer(alias).dims


def test_unique_shape_counts():
    assert len(network("resnet50").unique_shapes().layers) == 24  # res2a_branch1 == res2a_branch2c
    vgg = network("vgg16").unique_shapes()
    assert len(vgg.layers) == 12
    assert vgg.layer("conv5_3").name == "conv5_1" and vgg.layer("conv5_1").repeat == 3
