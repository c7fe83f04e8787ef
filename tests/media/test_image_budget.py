"""Unit tests of the image memory budget: estimates from headers, and FIFO admission."""

from __future__ import annotations

import asyncio

from service.media.image_budget import FIXED_BYTES, MemoryBudget, estimate_render_bytes
from service.media.image_params import ImageParams
from service.media.images import SourceInfo

MP49 = 7000 * 7000


def test_a_png_is_estimated_at_its_full_decoded_size() -> None:
    estimate = estimate_render_bytes(
        SourceInfo("PNG", 7000, 7000, "RGB", 1), ImageParams(width=800)
    )
    assert estimate == MP49 * 4 + 800 * 800 * 8 + FIXED_BYTES


def test_a_jpeg_shrunk_eight_times_is_estimated_at_its_draft_size() -> None:
    jpeg = estimate_render_bytes(SourceInfo("JPEG", 7000, 7000, "RGB", 1), ImageParams(width=400))
    png = estimate_render_bytes(SourceInfo("PNG", 7000, 7000, "RGB", 1), ImageParams(width=400))
    assert jpeg == 875 * 875 * 4 + 400 * 400 * 8 + FIXED_BYTES
    assert jpeg < png / 10


def test_conversion_and_rotation_add_a_copy_each() -> None:
    params = ImageParams(width=100)
    plain = estimate_render_bytes(SourceInfo("PNG", 1000, 1000, "RGB", 1), params)
    palette = estimate_render_bytes(SourceInfo("PNG", 1000, 1000, "P", 1), params)
    turned = estimate_render_bytes(SourceInfo("PNG", 1000, 1000, "RGB", 6), params)
    assert palette - plain == 1000 * 1000 * 1  # 1 byte a pixel decoded, 4 once converted
    assert turned - plain == 1000 * 1000 * 4


def test_the_budget_admits_in_order_while_estimates_fit() -> None:
    async def scenario() -> list[str]:
        budget = MemoryBudget(100)
        order: list[str] = []
        release = {name: asyncio.Event() for name in "abcd"}

        async def job(name: str, amount: int) -> None:
            async with budget.reserve(amount):
                order.append(f"+{name}:{budget.used}")
                await release[name].wait()
            order.append(f"-{name}")

        tasks = [asyncio.create_task(job(n, a)) for n, a in (("a", 60), ("b", 30), ("c", 50))]
        tasks.append(asyncio.create_task(job("d", 500)))  # over the whole budget: alone
        await asyncio.sleep(0)
        assert order == ["+a:60", "+b:90"]  # c waits, and d behind it (first come, first served)
        release["a"].set()
        await asyncio.sleep(0.01)
        assert order[-1] == "+c:80"
        release["b"].set()
        release["c"].set()
        await asyncio.sleep(0.01)
        assert order[-1] == "+d:100" and budget.used == 100
        release["d"].set()
        await asyncio.gather(*tasks)
        assert budget.used == 0
        return order

    asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    async def scenario() -> None:
        budget = MemoryBudget(10)
        gate = asyncio.Event()

        async def hold(amount: int) -> None:
            async with budget.reserve(amount):
                await gate.wait()

        first = asyncio.create_task(hold(10))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(hold(10))
        small = asyncio.create_task(hold(1))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(first, small)
        assert budget.used == 0

    asyncio.run(scenario())
