"""One settings table: name, type, default, help. It drives CLI defaults, the
``VISMERCH_*`` environment, an optional ``vismerch.toml`` and the generated docs.

Precedence: default < TOML file < environment < explicit overrides (CLI flags).
The resolved settings are stored with every ingest run.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vismerch.errors import UsageError


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = (
    # decode
    Setting("max_pixels", int, 40_000_000, "Refuse images with more pixels than this (decompression-bomb guard)."),
    Setting("max_image_bytes", int, 256 * 1024 * 1024, "Refuse image files larger than this many bytes (reason too-large) before reading them; each file is read with this cap, never unbounded. 256 MiB holds any product photo and most uncompressed TIFF masters; 0 turns the cap off."),
    Setting("working_size", int, 256, "Images are decoded straight to this square size for feature extraction."),
    Setting("thumb_size", int, 256, "Longest side of the thumbnails kept in the store (at most working_size; a square image at the working size is stored as is); 0 makes none."),
    Setting("thumb_format", str, "jpeg", "Thumbnail format: jpeg (quality 80, 4:2:0: about 5x faster to encode and to decode in a browser) or webp (about a quarter smaller); benchmarks/ingest.py prints both per 256 px thumbnail (about 0.2 vs 1.1 ms, 4.9 vs 3.7 KB on the sample shots)."),
    # manifests (text fields of every row, any format)
    Setting("manifest_max_id_chars", int, 500, "Manifests: longest product id; a row with a longer one is refused (the error names the row and field)."),
    Setting("manifest_max_text_chars", int, 10_000, "Manifests: longest text of any other field (title, description, category, attributes, ...); a row with a longer one is refused, naming the row and field."),
    # downloads (manifest rows whose image is an http(s)://, s3://, gs:// or file:// URL)
    Setting("fetch_timeout", float, 10.0, "Downloads: seconds to connect, and the longest wait for the next bytes of an answer (reason fetch-timeout)."),
    Setting("fetch_deadline", float, 60.0, "Downloads: seconds one attempt at one image may take in all, so a server that drips bytes cannot hold a worker (reason fetch-timeout)."),
    Setting("fetch_retries", int, 2, "Downloads: further attempts after a 5xx or 429 answer, a timeout or a dropped connection, waiting fetch_backoff, then twice that, ... (a 429/503 Retry-After of up to 30 s is honoured instead); other 4xx are not retried."),
    Setting("fetch_backoff", float, 0.5, "Downloads: seconds before the first retry; doubled for each further one (plus up to 25% jitter)."),
    Setting("fetch_per_host", int, 4, "Downloads: most requests to one host (or bucket) at once in each worker process; a run makes at most workers x this many."),
    Setting("fetch_concurrency", int, 16, "Downloads: images each worker process downloads at once (threads), a bounded window ahead of decoding."),
    Setting("fetch_memory_bytes", int, 64 * 1024 * 1024, "Downloads: bytes of downloaded images one process holds in memory at once, all downloads together; a download that would pass it (or any past fetch_spool_bytes) goes to a temporary file instead."),
    Setting("fetch_spool_bytes", int, 8 * 1024 * 1024, "Downloads: one download larger than this is written to a temporary file, not held in memory."),
    Setting("fetch_allow_hosts", str, "", "Downloads: comma-separated host names, IP addresses and CIDR networks that may be reached although not public (e.g. 127.0.0.1, 10.20.0.0/16, minio.internal). Empty: loopback, private, link-local, unique-local, multicast and reserved addresses are refused (reason fetch-refused-address), after DNS and on every redirect. A cloud metadata address (169.254.169.254, fd00:ec2::254, ...) is admitted only by an entry naming exactly it."),
    # pipeline
    Setting("batch_size", int, 64, "Images per feature batch."),
    Setting("task_size", int, 256, "Most images per task (one Parquet shard per task and backend); with several workers the images are spread evenly over a multiple of the workers' count of tasks, so that they finish together."),
    Setting("gpu_task_size", int, 1024, "Most images per task when a CUDA device encodes (--device cuda; the larger of this and task_size): each task goes through each encoder as one large batch, which keeps the GPU busy."),
    Setting("workers", int, 0, "Worker processes for decode and features; 0 means one per CPU core."),
    Setting("device", str, "cpu", "Torch device for feature extraction: cpu, cuda or cuda:N."),
    Setting("distributor", str, "auto", "Where ingest tasks run: auto (worker processes on this machine; on CUDA, stream), local, stream (one overlapped, bounded pipeline per device: decode workers, nvJPEG and the host-to-device copy on a side stream, the encoders, shard writes, all at once; selectable on cpu too), device (decode workers feeding one consumer per GPU, no overlap of writes), or ray (a Ray cluster: tasks decode, one encoder actor per GPU; needs vismerch[ray], see docs/multinode.md)."),
    Setting("ray_address", str, "local", "Ray cluster for distributor ray: local starts a Ray runtime on this machine for the run; auto joins the cluster this machine belongs to (`ray start`); HOST:PORT joins that head node."),
    # quality thresholds (each flag is reported with its measured value)
    Setting("quality_min_side", int, 500, "Flag low-resolution when the shorter side is below this many pixels."),
    Setting("quality_max_aspect", float, 2.5, "Flag extreme aspect ratio when long/short side exceeds this."),
    Setting("quality_blur_min", float, 0.3, "Flag blur when edge sharpness is below this. Sharpness = Laplacian energy / gradient energy over the blocks that hold an edge: about 1/(2*sigma^2) for edges blurred by a Gaussian of sigma working-size pixels, whatever their contrast and however much of the frame is product. 0.3 is sigma 1.3 px at 256 (edges spread over ~3 px; ~5 px on a 1000 px original, soft when zoomed); crisp images score 1-6."),
    Setting("quality_dark_max", float, 50.0, "Flag under-exposure when even the brightest 1% of the frame is darker than this L*. 50 is photographic middle grey (18% reflectance): nothing in the picture reaches a light tone, so a black product on white is fine but a white backdrop shot 2.5 stops under is not."),
    Setting("quality_bright_min", float, 90.0, "Flag over-exposure when even the darkest 1% of the frame is lighter than this L* (about #e2e2e2): the product has no shadows or dark detail left and washes into the backdrop."),
    Setting("quality_background_delta", float, 6.0, "Flag non-white background when the border colour's CIEDE2000 from white exceeds this: about 2.5 just-noticeable differences (JND ~2.3), so off-white studio backdrops (#f0f0f0 is 3.0) pass and visibly grey ones (#e0e0e0 is 6.5) do not."),
    Setting("quality_clutter", float, 6.0, "Flag cluttered background when the border's colour spread exceeds this: the median over 16 border segments of the RMS Lab distance from the segment's mean (about 2.5 JND). Noise, paper texture and smooth light fall-off stay under ~3; objects, scenes and patterns go well above; a product touching one or two sides is ignored by the median."),
    Setting("quality_min_fill", float, 0.4, "Flag too-small when the product spans less than this fraction of the frame along its longer side (the `extent` metric: its bounding box, not its pixel count, so thin items such as necklaces or pens are judged by their size). Below 0.4 the product covers under a sixth of its grid tile even if square."),
    Setting("quality_offcentre", float, 0.15, "Flag off-centre when the centre of the product's bounding box is further than this (fraction of the frame) from the middle: its margins then differ by 30% of the frame, lopsided at a glance in a grid."),
    Setting("audit_colour_delta", float, 25.0, "Catalog audit: flag a listed colour whose CIEDE2000 to the closest main image colour (dominant, or any covering a quarter of the product) exceeds this. Neighbouring names in the colour table are 15-20 apart and studio lighting moves a colour by up to ~10, so 25 reports only a clearly different colour."),
    # duplicates and index
    Setting("dup_layout", float, 0.965, "Near-duplicates (signature rules, merch/dupfind.py): the two product boxes' 32x32 log-luma must correlate at least this much, as they are or with one a region of the other (a crop). Padding, letterbox, trimmed margins, resizing, re-encoding, brightness, contrast, gamma and white balance leave true copies of the generated catalogs at 0.985 or more when they line up as they are; look-alikes of one silhouette and colour reach 0.986, which dup_detail and the colour rules separate. On a 2,000-product generated catalog every value from 0.96 to 0.975 gives the same pairs; the OpenMoji set (thin outlines) loses recall above 0.965 (benchmarks/RESULTS.md; these figures from colour version 3's signatures, and with version 4's 0.97 costs recall on generated seeds 5 and 8). Kept for colour version 5, whose boxes follow the product to a fraction of a cell: thirteen generated catalogs at precision >= 0.982 and recall >= 0.972, two OpenMoji samples at recall 0.975 and 0.996."),
    Setting("dup_detail", float, 0.93, "Near-duplicates (signature rules): the boxes' fine detail (the signature minus a blur of sigma ~1 cell: edges, seams, print) must correlate at least this much. True copies 0.945 or more on the generated catalogs, look-alike products of one silhouette mostly under 0.93 (colour version 3's signatures; with version 4's, 0.94 costs recall on four of eight generated catalogs and on OpenMoji)."),
    Setting("dup_layout_alone", float, 0.995, "Near-duplicates (signature rules): a layout correlation of at least this is a duplicate whatever dup_detail says (a copy shrunk in its frame by padding keeps its layout but may lose the finest detail); below it both dup_layout and dup_detail must hold. Set on nine generated catalogs (benchmarks/RESULTS.md) with colour version 4's anti-aliased signatures: 0.99 let look-alikes of one silhouette and colour through (precision 0.978-0.979 on three of them), 0.995 keeps precision >= 0.982 on all nine at the same recall; on OpenMoji 0.99-0.995 change under 0.005 of precision or recall."),
    Setting("dup_box_hash_distance", int, 12, "Near-duplicates (signature rules): candidates whose box hashes (the DCT hash of the product box's signature, so padding and trims do not move it) differ in at most this many of 64 bits. Candidates only: every pair is then checked by dup_layout, dup_detail and the colour rules."),
    Setting("dup_signature_neighbours", int, 12, "Near-duplicates (signature rules): candidates are also each image's this many nearest by a coarse signature vector (8x8 layout plus product colour), which crops that cut into the product keep close; higher finds more crops in catalogs with many look-alikes, at a cost in time."),
    Setting("dup_colour_ab", float, 10.0, "Near-duplicates (signature rules): the products' mean a*b* (white balance undone by the backdrop) may differ by at most this, or dup_colour_ab_share of the larger chroma: light edits move it 0-11, a colourway (same shot, another colour: another SKU) 19 or more on the generated catalogs; on OpenMoji a skin-tone change moves the mean little (dup_colour_cell catches most of those)."),
    Setting("dup_colour_ab_share", float, 0.3, "Near-duplicates (signature rules): the a*b* tolerance as a share of the larger chroma (a saturated product's a*b* moves more under gamma and contrast)."),
    Setting("dup_colour_l", float, 12.0, "Near-duplicates (signature rules): the products' mean L* may differ by at most this (light edits: 0-10 on the generated catalogs; colourways that keep the hue, e.g. navy and light blue, differ more)."),
    Setting("dup_colour_cell", float, 13.0, "Near-duplicates (signature rules), pairs that line up as they are: no 8x8 cell of the product box may change colour by more than this (CIEDE76) beyond one global light edit fitted over all cells. True copies leave at most 11.7 on the generated catalogs and 11.6 on the OpenMoji set (benchmarks/dup_eval.py); a colourway that recolours part of a product (skin tones, a sole) leaves 14 or more on 15 of 20 OpenMoji skin-tone pairs."),
    Setting("dup_allow_mirror", bool, False, "Near-duplicates (signature rules): count a mirrored (left-right flipped) shot as a duplicate. Off: a pair that lines up better mirrored than as it is is kept apart."),
    Setting("dup_hash_distance", int, 10, "Near-duplicates of images without a box signature (features written before it existed; legacy rules), same-shot rule: perceptual-hash Hamming distance at most this (of 64 bits) and vector cosine at least dup_cosine. Planted copies (re-encodes, resizes, format changes) move the hash 0 bits at the median and up to 10 (benchmarks/dedup_evidence.py); one million random hashes hold ~5,000 chance pairs within 10 (C(10^6, 2) * P(Binomial(64, 1/2) <= 10)), which the cosine gate removes."),
    Setting("dup_structure", float, 0.975, "Legacy rules (images without a box signature): near-duplicates must also correlate at least this much in 32x32 luma layout, as they are or with one of them centre-zoomed (a crop). Measured by benchmarks/dedup_evidence.py on 8 generated catalogs: re-encoded, resized and re-formatted copies 0.974-1.0, 4-6% crops 0.937-1.0 (median 0.992); look-alike products that pass the hash and cosine gates 0.47-0.99 (median 0.88), 8 of 954 at 0.975 or more."),
    Setting("dup_cosine", float, 0.92, "Legacy rules (images without a box signature), same-shot rule: vector cosine at least this (together with dup_hash_distance)."),
    Setting("index_exact_max", int, 50_000, "Use an exact FAISS index (and exact duplicate-candidate search) up to this many vectors, HNSW above."),
    Setting("multicolour_max_weight", float, 0.55, "A product is `multicolour` when no single named colour covers at least this share of its pixels: a name must hold a clear majority (over half, with a margin for measurement noise), so a 50/50 two-colour item is multicolour."),
    Setting("colour_foreground_delta", float, 6.0, "Colour backend: a pixel belongs to the product when its CIEDE2000 from the estimated background exceeds this (about 2.5 JND: above noise and JPEG ringing, below almost any product/backdrop contrast; faint shadows stay background, dark shadow cores count as product)."),
    Setting("dup_crop_hamming", int, 16, "Legacy rules (images without a box signature), crop rule: hash distance at most this when the vector cosine is at least dup_crop_cosine. A crop moves the phash several bits (0-10, median 4, for the 4-6% crops of benchmarks/dedup_evidence.py, more for larger ones), past dup_hash_distance; set equal to dup_hash_distance to turn the rule off."),
    Setting("dup_crop_cosine", float, 0.97, "Legacy rules (images without a box signature), crop rule: vector cosine at least this (near-identical content) for hash distances up to dup_crop_hamming."),
    Setting("dup_neighbours", int, 32, "Legacy rules (images without a box signature): near-duplicate candidates kept per image by hash distance (the crop rule looks at the 8 nearest vectors); bounds memory on catalogs with thousands of look-alike hashes."),
    Setting("index_hnsw_m", int, 32, "HNSW graph degree (links per vector) above index_exact_max: higher is more accurate, slower to build and larger."),
    Setting("index_ef_construction", int, 64, "HNSW build-time search breadth: higher builds a better graph, more slowly."),
    Setting("index_ef_search", int, 64, "HNSW query-time search breadth (raised to 2k for k results): higher is more accurate and slower."),
    # grid arrangement
    Setting("arrange_weights", str, "", "Grid arrangement: the business score's blend when a command gives none, e.g. sales=0.4,ctr=0.4,newness=0.2 (signals: docs/merchandising.md); empty = sales 0.35, revenue 0.35, margin, newness and stock 0.1 each."),
    Setting("arrange_lookalike_cosine", float, 0.9, "Grid arrangement: neighbours whose vector cosine is at least this count as look-alikes."),
    Setting("arrange_window", int, 32, "Grid arrangement: candidates per slot; also the most positions diversity may push a product below its plain place."),
    Setting("arrange_business_floor", float, 0.98, "Grid arrangement: keep at least this share of the plain order's DCG over the first 48 positions."),
    Setting("arrange_first_screen_rows", int, 2, "Grid arrangement: rows of the widest grid counted as the first screen (quality-flagged products stay below it unless pinned)."),
    # neural encoders, tagging and search
    Setting("precision", str, "auto", "Neural precision: auto|fp32|bf16|fp16|fp8|fp4 (auto = fastest the device has, verified)."),
    Setting("precision_min_cosine", float, 0.995, "Low-precision embeddings must keep this mean cosine vs fp32 on a calibration batch, else step down."),
    Setting("tag_threshold", float, 0.25, "Minimum zero-shot/few-shot score (softmax over an attribute's labels) for a tag."),
    Setting("tag_knn", int, 5, "Labelled neighbours that vote in few-shot tag propagation."),
    Setting("tag_knn_min_similarity", float, 0.75, "A labelled example votes only if its image cosine is at least this."),
    Setting("search_rrf_k", int, 60, "Reciprocal rank fusion constant for hybrid search."),
    Setting("search_depth", int, 200, "Candidates taken from each ranking before fusion."),
    Setting("search_colour_min_share", float, 0.1, "With --colour, keep products with at least this share of the foreground near the colour."),
    # HTTP API (vismerch serve)
    # shopper events (events/)
    Setting("events_batch_max", int, 500, "Events: most events one POST /api/v1/events batch may hold (422 naming events above)."),
    Setting("events_future_slack_s", float, 300.0, "Events: seconds an event's timestamp may lie ahead of the server's clock (client clock skew); later ones are refused as future-timestamp."),
    Setting("events_window_days", int, 28, "Events: days of shopper events behind the behaviour signals of the business score (ctr, conversion, revenue_per_impression; trending compares the last 7 days with them)."),
    Setting("events_compact_rows", int, 50_000, "Events: accepted events wait in the log's SQLite inbox until this many, then move into a day's Parquet file in one transaction."),
    Setting("serve_rate_limit", float, 50.0, "API: requests per second each key may make on average (token bucket; over it: 429 with Retry-After); 0 turns the limit off."),
    Setting("serve_rate_burst", int, 200, "API: requests a key may make at once before serve_rate_limit applies."),
    Setting("serve_cors_origins", str, "", "API: comma-separated origins allowed by CORS (e.g. https://shop.example); empty = CORS off."),
    Setting("serve_page_limit", int, 200, "API: the most items one page of a list may hold (the limit parameter is capped here)."),
    Setting("serve_upload_max_bytes", int, 8_000_000, "API: largest image upload accepted by search-by-image (413 above)."),
    Setting("serve_upload_max_pixels", int, 25_000_000, "API: most pixels an uploaded query image may have (422 above)."),
    Setting("serve_source_root", str, "", "API: ingest jobs read folders and manifests only inside this directory; paths that leave it are refused. Empty (the default): the API starts no ingest jobs (409, the hint names this setting) until an operator names the folder, since any default (the store's parent was one) would open folders nobody chose."),
    Setting("serve_body_max_bytes", int, 1_000_000, "API: largest request body (JSON) by Content-Length or by the bytes streamed, checked after the key and before the body is read (413 above); search-by-image uploads have serve_upload_max_bytes instead."),
    Setting("serve_header_timeout", float, 10.0, "API: seconds a client has to send a request's headers once it starts one (or after connecting); the connection is closed after that."),
    Setting("serve_body_timeout", float, 30.0, "API: seconds a request body may stall between two chunks before the request is answered 408 and closed."),
    Setting("serve_auth_fail_limit", int, 10, "API: failed sign-ins (unknown, wrong, expired or revoked keys) one key id or one client address may make per serve_auth_fail_window before 429 with Retry-After; 0 turns throttling off."),
    Setting("serve_auth_fail_window", float, 60.0, "API: seconds over which serve_auth_fail_limit counts failures."),
    Setting("serve_sessions_per_key", int, 20, "API: web app sessions one API key may hold; a new sign-in past it ends that key's least recently used session (never another key's)."),
    Setting("serve_client_ip_header", str, "", "API: behind a reverse proxy, the header holding the client address (e.g. X-Forwarded-For; its last entry is used), for failed-sign-in throttling; empty = the socket's peer."),
)

_BY_NAME = {s.name: s for s in SETTINGS}
ENV_PREFIX = "VISMERCH_"


def _coerce(setting: Setting, value: Any, origin: str) -> Any:
    try:
        if setting.type is bool and isinstance(value, str):
            return value.strip().lower() in {"1", "true", "yes", "on"}
        return setting.type(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"setting {setting.name} from {origin}: {value!r} is not a valid {setting.type.__name__}",
            hint=setting.help,
        ) from exc


class Settings:
    """Resolved settings; attribute access (``settings.max_pixels``)."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def replace(self, **overrides: Any) -> Settings:
        return load_settings(base=self._values, overrides=overrides)

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"


def setting(settings: Any, name: str) -> Any:
    """``name`` from ``settings`` (a Settings or any object with attributes), or the table's
    default when settings is None or does not set it. For code that accepts ``settings=None``."""
    value = getattr(settings, name, None) if settings is not None else None
    return _BY_NAME[name].default if value is None else value


def load_settings(
    toml_path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    base: dict[str, Any] | None = None,
) -> Settings:
    """Resolve settings: defaults (or ``base``) < TOML < ``VISMERCH_*`` env < ``overrides``."""
    values = {s.name: s.default for s in SETTINGS} if base is None else dict(base)
    if base is None:
        toml_path = toml_path or os.environ.get(ENV_PREFIX + "CONFIG")
        if toml_path:
            path = Path(toml_path)
            try:
                data = tomllib.loads(path.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise UsageError(f"cannot read settings file {path}: {exc}") from exc
            for key, value in data.items():
                if key not in _BY_NAME:
                    raise UsageError(f"unknown setting {key!r} in {path}", hint="see docs/settings.md")
                values[key] = _coerce(_BY_NAME[key], value, str(path))
        env = os.environ if env is None else env
        for s in SETTINGS:
            key = ENV_PREFIX + s.name.upper()
            if key in env:
                values[s.name] = _coerce(s, env[key], key)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in _BY_NAME:
            raise UsageError(f"unknown setting {key!r}")
        values[key] = _coerce(_BY_NAME[key], value, "override")
    return Settings(values)
