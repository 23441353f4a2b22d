"""Image downloads: what concurrent fetching buys against a server with latency, and what
a re-run costs when every image is unchanged (conditional requests answered 304).

A loopback server (vismerch.testing.image_server) answers each request after
``--latency`` seconds, like a CDN far away. The same images are fetched one at a time and
on ``fetch_concurrency`` threads with ``fetch_per_host`` slots (the worker's own code path:
``catalog.fetch.in_order`` + ``fetch``), then again with their validators.

    python benchmarks/fetch.py [--n 200] [--latency 0.05] [--per-host 4 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _run(urls, policy, validators=None) -> tuple[float, list]:
    from vismerch.catalog.fetch import fetch, in_order

    validators = validators or {}
    started = time.perf_counter()
    out = list(in_order(urls, lambda u: fetch(u, policy, *validators.get(u, (None, None))),
                        policy.concurrency))
    return time.perf_counter() - started, [r for _, r in out]


def main() -> None:
    from vismerch.catalog.fetch import FetchPolicy
    from vismerch.catalog.urlguard import AllowList
    from vismerch.testing.image_server import ImageServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--kb", type=int, default=60, help="bytes per image, in KB")
    parser.add_argument("--per-host", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    images = {f"{i:05d}.jpg": os.urandom(args.kb * 1024) for i in range(args.n)}
    allow = AllowList.parse("127.0.0.1")
    rows = []
    with ImageServer(images, slow_s=args.latency) as server:
        urls = [server.url(f"/slow/{name}") for name in images]
        serial = FetchPolicy(per_host=1, concurrency=1, allow=allow)
        seconds, _ = _run(urls, serial)
        rows.append({"per_host": 1, "concurrency": 1, "seconds": seconds})
        for per_host in args.per_host:
            policy = FetchPolicy(per_host=per_host, concurrency=16, allow=allow)
            seconds, got = _run(urls, policy)
            rows.append({"per_host": per_host, "concurrency": 16, "seconds": seconds})
        validators = {u: (g.etag, g.last_modified) for u, g in zip(urls, got, strict=True)}
        server.reset_counts()
        seconds, again = _run(urls, policy, validators)
        assert all(g.not_modified for g in again) and server.downloads() == 0
        rerun = {"per_host": policy.per_host, "seconds": seconds, "downloads": server.downloads()}
    base = rows[0]["seconds"]
    print(f"{args.n} images of {args.kb} KB, {args.latency * 1000:.0f} ms per request, loopback")
    for row in rows:
        row["images_per_s"] = round(args.n / row["seconds"], 1)
        row["speedup"] = round(base / row["seconds"], 2)
        print(f"  per_host {row['per_host']:>2}, {row['concurrency']:>2} threads: "
              f"{row['images_per_s']:>7} images/s  x{row['speedup']}")
    print(f"  re-run, all unchanged (304): {args.n / rerun['seconds']:.1f} images/s, "
          f"{rerun['downloads']} downloads")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"schema": "vismerch.fetch-bench/1", "n": args.n,
                       "latency_s": args.latency, "rows": rows, "rerun": rerun}, fh, indent=2)


if __name__ == "__main__":
    main()
