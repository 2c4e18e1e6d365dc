"""`cascade.streaming.TokenChannel`: the one bridge from a generating thread to its reader (a
blocking iterator, or an event loop), used by `VLM.stream`, the SSE response and Ray replicas."""

import asyncio
import threading
import time

import pytest

from cascade.streaming import TokenChannel


def _produce(
    channel: TokenChannel, n: int, error: BaseException | None = None, pause: float = 0.0
) -> threading.Thread:
    def work() -> None:
        for i in range(n):
            channel.put(i)
            if pause:
                time.sleep(pause)
        channel.close(error)

    t = threading.Thread(target=work)
    t.start()
    return t


def test_a_blocking_reader_gets_every_token_in_order_then_the_end():
    channel = TokenChannel()
    t = _produce(channel, 500)
    assert list(channel) == list(range(500))
    t.join()


def test_the_producers_error_reaches_the_reader_after_the_tokens():
    channel = TokenChannel()
    t = _produce(channel, 3, ValueError("decode failed"))
    got = []
    with pytest.raises(ValueError, match="decode failed"):
        for event in channel:
            got.append(event)
    assert got == [0, 1, 2]
    t.join()


def test_an_async_reader_is_woken_by_a_thread_and_the_loop_stays_free():
    async def read() -> tuple[list[int], int]:
        channel, ticks = TokenChannel(), [0]

        async def tick() -> None:  # runs while the reader waits: the loop is not blocked
            while True:
                ticks[0] += 1
                await asyncio.sleep(0.001)

        ticker = asyncio.ensure_future(tick())
        t = _produce(channel, 20, pause=0.005)
        got = [event async for event in channel]
        ticker.cancel()
        t.join()
        return got, ticks[0]

    got, ticks = asyncio.run(read())
    assert got == list(range(20)) and ticks > 5


def test_an_async_reader_gets_the_error_and_tokens_after_close_are_dropped():
    async def read() -> list[int]:
        channel = TokenChannel()
        _produce(channel, 2, RuntimeError("gone")).join()
        channel.put(99)  # the run ended: nobody reads this
        got = []
        with pytest.raises(RuntimeError, match="gone"):
            async for event in channel:
                got.append(event)
        return got

    assert asyncio.run(read()) == [0, 1]
