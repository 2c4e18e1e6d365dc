"""`StopSignals`, which `cascade serve --ray` holds from before Serve starts: a signal that comes
early is kept until the driver waits for it, and a second ^C stops at once."""

from __future__ import annotations

import os
import signal

import pytest

from cascade.serve.stopping import StopSignals


def test_a_signal_before_the_wait_is_kept_and_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. while serve.run is still returning
        assert stop.wait() == signal.SIGTERM
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_interrupt_stops_at_once():
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait() == signal.SIGINT
