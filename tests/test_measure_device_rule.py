"""measure picks the spec for roofline fractions by the one device rule (spec device_names)."""

import types

import pytest

from ssmbench.commands.measure import _spec_for
from ssmbench.errors import UserError
from ssmbench.hwspecs import get_spec

GPU = types.SimpleNamespace(type="cuda", index=0)


@pytest.fixture
def on_h200(monkeypatch):
    monkeypatch.setattr("ssmbench.measure.environment.device_name", lambda device: "NVIDIA H200")


def test_no_hw_on_a_gpu_takes_the_spec_that_lists_it(on_h200):
    assert _spec_for(GPU, None).id == "h200-sxm"


def test_hw_of_another_gpu_is_an_error_naming_both(on_h200):
    with pytest.raises(UserError, match="h100-sxm.*'NVIDIA H200'.*device_names"):
        _spec_for(GPU, get_spec("h100-sxm"))


def test_matching_and_hypothetical_specs_are_taken(on_h200):
    assert _spec_for(GPU, get_spec("h200-sxm")).id == "h200-sxm"
    assert _spec_for(GPU, get_spec("ssm-sram-asic")).id == "ssm-sram-asic"


def test_an_unknown_gpu_gets_no_fractions_and_says_why(monkeypatch, capsys):
    monkeypatch.setattr("ssmbench.measure.environment.device_name", lambda device: "Some Future GPU")
    assert _spec_for(GPU, None) is None
    assert "no built-in spec lists device 'Some Future GPU'" in capsys.readouterr().err


def test_the_cpu_keeps_what_it_was_given():
    cpu = types.SimpleNamespace(type="cpu", index=None)
    assert _spec_for(cpu, None) is None
    assert _spec_for(cpu, get_spec("h100-sxm")).id == "h100-sxm"
