"""One settings table: name, type, default, help. It drives CLI defaults, the
``VISMERCH_*`` environment, an optional ``vismerch.toml`` and the generated docs.

Precedence: default < TOML file < environment < explicit overrides (CLI flags).
The resolved settings are stored with every ingest run.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vismerch.errors import UsageError

HELP_MAX_CHARS = 200  # one or two sentences; the reasoning goes in docs/setting-notes.md


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    help: str
    bounds: tuple[float | None, float | None] = (None, None)  # inclusive low, high; None: open

    @property
    def summary(self) -> str:
        """The help's first sentence, for an error hint."""
        return re.split(r"(?<=\.)\s+(?=[A-Z])", self.help, maxsplit=1)[0]


SETTINGS: tuple[Setting, ...] = (
    # decode
    Setting("max_pixels", int, 40_000_000, "Refuse images with more pixels than this (decompression-bomb guard)."),
    Setting("max_image_bytes", int, 256 * 1024 * 1024, "Refuse image files larger than this many bytes (reason too-large) before reading them; every read is capped at it. 0 turns the cap off."),
    Setting("working_size", int, 256, "Images are decoded straight to this square size for feature extraction."),
    Setting("thumb_size", int, 256, "Longest side of the thumbnails kept in the store (at most working_size; a square image at the working size is stored as is); 0 makes none."),
    Setting("thumb_format", str, "jpeg", "Thumbnail format: jpeg (quality 80, 4:2:0; faster to encode and to decode) or webp (about a quarter smaller)."),
    # manifests (text fields of every row, any format)
    Setting("manifest_max_id_chars", int, 500, "Manifests: longest product id; a row with a longer one is refused (the error names the row and field)."),
    Setting("manifest_max_text_chars", int, 10_000, "Manifests: longest text of any other field (title, description, category, attributes, ...); a row with a longer one is refused, naming the row and field."),
    # downloads (manifest rows whose image is an http(s)://, s3://, gs:// or file:// URL)
    Setting("fetch_timeout", float, 10.0, "Downloads: seconds to connect, and the longest wait for the next bytes of an answer (reason fetch-timeout)."),
    Setting("fetch_deadline", float, 60.0, "Downloads: seconds one attempt at one image may take in all, so a server that drips bytes cannot hold a worker (reason fetch-timeout)."),
    Setting("fetch_retries", int, 2, "Downloads: further attempts after a 5xx or 429 answer, a timeout or a dropped connection, with doubling waits from fetch_backoff. Other 4xx are not retried."),
    Setting("fetch_backoff", float, 0.5, "Downloads: seconds before the first retry; doubled for each further one (plus up to 25% jitter)."),
    Setting("fetch_per_host", int, 4, "Downloads: most requests to one host (or bucket) at once in each worker process; a run makes at most workers x this many."),
    Setting("fetch_concurrency", int, 16, "Downloads: images each worker process downloads at once (threads), a bounded window ahead of decoding."),
    Setting("fetch_memory_bytes", int, 64 * 1024 * 1024, "Downloads: bytes of downloaded images one process holds in memory at once, all downloads together; a download that would pass it (or any past fetch_spool_bytes) goes to a temporary file instead."),
    Setting("fetch_spool_bytes", int, 8 * 1024 * 1024, "Downloads: one download larger than this is written to a temporary file, not held in memory."),
    Setting("fetch_allow_hosts", str, "", "Downloads: comma-separated hosts, IP addresses and CIDR networks that may be reached although not public (e.g. 10.20.0.0/16, minio.internal). Empty: public addresses only."),
    # pipeline
    Setting("batch_size", int, 64, "Images per feature batch."),
    Setting("task_size", int, 256, "Most images per task (one Parquet shard per task and backend); with several workers the images are spread evenly over a multiple of the workers' count of tasks, so that they finish together."),
    Setting("gpu_task_size", int, 1024, "Most images per task when a CUDA device encodes (the larger of this and task_size): one large batch per encoder."),
    Setting("workers", int, 0, "Worker processes for decode and features; 0 means one per CPU core."),
    Setting("device", str, "cpu", "Torch device for feature extraction: cpu, cuda or cuda:N."),
    Setting("distributor", str, "auto", "Where ingest tasks run: auto (worker processes here; on CUDA, stream), local, stream (one overlapped pipeline per device), device, or ray (docs/multinode.md)."),
    Setting("ray_address", str, "local", "Ray cluster for distributor ray: local starts a Ray runtime on this machine for the run; auto joins the cluster this machine belongs to (`ray start`); HOST:PORT joins that head node."),
    # quality thresholds (each flag is reported with its measured value)
    Setting("quality_min_side", int, 500, "Flag low-resolution when the shorter side is below this many pixels."),
    Setting("quality_max_aspect", float, 2.5, "Flag extreme aspect ratio when long/short side exceeds this."),
    Setting("quality_blur_min", float, 0.3, "Flag blur when edge sharpness is below this: about 1/(2 sigma^2) for edges blurred by a Gaussian of sigma pixels at 256 px. Crisp images score 1-6; 0.3 is sigma 1.3 px."),
    Setting("quality_dark_max", float, 50.0, "Flag under-exposure when even the brightest 1% of the frame is darker than this L*. 50 is middle grey: a black product on white passes, a white backdrop 2.5 stops under does not."),
    Setting("quality_bright_min", float, 90.0, "Flag over-exposure when even the darkest 1% of the frame is lighter than this L* (about #e2e2e2): the product has no shadows or dark detail left and washes into the backdrop."),
    Setting("quality_background_delta", float, 6.0, "Flag non-white background when the border colour's CIEDE2000 from white exceeds this: off-white #f0f0f0 (3.0) passes, visibly grey #e0e0e0 (6.5) does not."),
    Setting("quality_clutter", float, 6.0, "Flag cluttered background when the border's colour spread (median RMS Lab distance over 16 border segments) exceeds this. Noise and paper texture stay under ~3."),
    Setting("quality_min_fill", float, 0.4, "Flag too-small when the product spans less than this fraction of the frame along its longer side (its bounding box, so thin items are judged by their size).", bounds=(0.0, 1.0)),
    Setting("quality_offcentre", float, 0.15, "Flag off-centre when the centre of the product's bounding box is further than this (fraction of the frame) from the middle: its margins then differ by 30% of the frame, lopsided at a glance in a grid.", bounds=(0.0, 1.0)),
    Setting("audit_colour_delta", float, 25.0, "Catalog audit: flag a listed colour further than this (CIEDE2000) from the closest main image colour. Neighbouring colour names are 15-20 apart; lighting moves one up to ~10."),
    # duplicates and index
    Setting("dup_layout", float, 0.965, "Near-duplicates: the two product boxes' 32x32 log-luma must correlate at least this much, as they are or one as a crop of the other."),
    Setting("dup_detail", float, 0.93, "Near-duplicates: the boxes' fine detail (the signature minus a blur: edges, seams, print) must correlate at least this much, unless dup_layout_alone holds."),
    Setting("dup_layout_alone", float, 0.995, "Near-duplicates: a layout correlation of at least this is a duplicate whatever dup_detail says (a padded copy keeps its layout but may lose fine detail)."),
    Setting("dup_box_hash_distance", int, 12, "Near-duplicates: candidates whose box hashes (the DCT hash of the product box's signature) differ in at most this many of 64 bits; the other dup_* rules then confirm each."),
    Setting("dup_signature_neighbours", int, 12, "Near-duplicates: each image's this many nearest by a coarse 8x8 layout-plus-colour vector are candidates too (crops stay close); more finds more crops, slower."),
    Setting("dup_colour_ab", float, 10.0, "Near-duplicates: the products' mean a*b* may differ by at most this, or dup_colour_ab_share of the larger chroma (light edits move it 0-11, a colourway 19 or more)."),
    Setting("dup_colour_ab_share", float, 0.3, "Near-duplicates (signature rules): the a*b* tolerance as a share of the larger chroma (a saturated product's a*b* moves more under gamma and contrast)."),
    Setting("dup_colour_l", float, 12.0, "Near-duplicates (signature rules): the products' mean L* may differ by at most this (light edits: 0-10 on the generated catalogs; colourways that keep the hue, e.g. navy and light blue, differ more)."),
    Setting("dup_colour_cell", float, 13.0, "Near-duplicates that line up as they are: no 8x8 cell of the product box may change colour by more than this (CIEDE76) beyond one global light edit."),
    Setting("dup_colour_turn", float, 6.0, "Near-duplicates that line up as they are: the 20 fine cells whose hue turned most may turn by at most this ((1 - cos) x chroma); a light edit never turns a hue round."),
    Setting("dup_colour_fine", float, 18.0, "Near-duplicates that line up as they are: no 32x32 cell of the box may change colour by more than this (ΔE) beyond a global light edit; a thin product's colourway."),
    Setting("dup_allow_mirror", bool, False, "Near-duplicates (signature rules): count a mirrored (left-right flipped) shot as a duplicate. Off: a pair that lines up better mirrored than as it is is kept apart."),
    Setting("index_exact_max", int, 50_000, "Use an exact FAISS index (and exact duplicate-candidate search) up to this many vectors, HNSW above."),
    Setting("multicolour_max_weight", float, 0.55, "A product is multicolour when no single named colour covers at least this share of its pixels (a clear majority, with a margin for noise).", bounds=(0.0, 1.0)),
    Setting("colour_foreground_delta", float, 6.0, "Colour backend: a pixel belongs to the product when its CIEDE2000 from the estimated background exceeds this (above noise and JPEG ringing; faint shadows stay background)."),
    Setting("style_encoder", str, "auto", "Style vectors made at ingest for 'same style' similar items: effnet (EfficientNet-Lite0, vismerch[style]), shape, off, or auto (effnet on a CUDA device with the extra, else off)."),
    Setting("similar_colour_weight", float, 0.5, "Similar items in mode both: colour's share of the fused score (the rest is style's); each space's cosines are standardised over the candidates first.", bounds=(0.0, 1.0)),
    Setting("index_hnsw_m", int, 32, "HNSW graph degree (links per vector) above index_exact_max: higher is more accurate, slower to build and larger."),
    Setting("index_ef_construction", int, 64, "HNSW build-time search breadth: higher builds a better graph, more slowly."),
    Setting("index_ef_search", int, 64, "HNSW query-time search breadth (raised to 2k for k results): higher is more accurate and slower."),
    Setting("index_large_kind", str, "ivf", "Search and similarity indexes above index_exact_max: ivf (k-means cells, builds a million vectors in about a minute on two cores) or hnsw (a graph: faster queries, many minutes to build at that size)."),
    Setting("index_nprobe", int, 32, "IVF indexes: cells searched per query (of about sqrt(n), at most 1,024): higher is more accurate and slower."),
    # grid arrangement
    Setting("arrange_weights", str, "", "Grid arrangement: the business score's blend when a command gives none, e.g. sales=0.4,ctr=0.4,newness=0.2; empty = sales and revenue 0.35, margin, newness, stock 0.1."),
    Setting("arrange_lookalike_cosine", float, 0.9, "Grid arrangement: neighbours whose vector cosine is at least this count as look-alikes."),
    Setting("arrange_window", int, 32, "Grid arrangement: candidates per slot; also the most positions diversity may push a product below its plain place."),
    Setting("arrange_business_floor", float, 0.98, "Grid arrangement: keep at least this share of the plain order's DCG over the first 48 positions.", bounds=(0.0, 1.0)),
    Setting("arrange_first_screen_rows", int, 2, "Grid arrangement: rows of the widest grid counted as the first screen (quality-flagged products stay below it unless pinned)."),
    Setting("rules_bury_out_of_stock", bool, True, "Grid arrangement: bury out-of-stock products to the bottom of every collection (an implicit rule shown in \"why here\"), unless a bury-out-of-stock rule reaches the page."),
    # neural encoders, tagging and search
    Setting("precision", str, "auto", "Neural precision: auto|fp32|bf16|fp16|fp8|fp4 (auto = fastest the device has, verified)."),
    Setting("precision_min_cosine", float, 0.995, "Low-precision embeddings must keep this mean cosine vs fp32 on a calibration batch, else step down.", bounds=(0.0, 1.0)),
    Setting("tag_threshold", float, 0.25, "Minimum zero-shot/few-shot score (softmax over an attribute's labels) for a tag."),
    Setting("tag_knn", int, 5, "Labelled neighbours that vote in few-shot tag propagation."),
    Setting("tag_knn_min_similarity", float, 0.75, "A labelled example votes only if its image cosine is at least this."),
    Setting("search_rrf_k", int, 60, "Reciprocal rank fusion constant for hybrid search."),
    Setting("search_depth", int, 200, "Candidates taken from each ranking before fusion."),
    Setting("search_colour_min_share", float, 0.1, "With --colour, keep products with at least this share of the foreground near the colour.", bounds=(0.0, 1.0)),
    # HTTP API (vismerch serve)
    # shopper events (events/)
    Setting("events_batch_max", int, 500, "Events: most events one POST /api/v1/events batch may hold (422 naming events above)."),
    Setting("events_future_slack_s", float, 300.0, "Events: seconds an event's timestamp may lie ahead of the server's clock (client clock skew); later ones are refused as future-timestamp."),
    Setting("events_window_days", int, 28, "Events: days of shopper events behind the behaviour signals of the business score (ctr, conversion, revenue_per_impression; trending compares the last 7 days with them)."),
    Setting("events_compact_rows", int, 50_000, "Events: accepted events wait in the log's SQLite inbox until this many, then move into a day's Parquet file in one transaction."),
    Setting("serve_rate_limit", float, 50.0, "API: requests per second each key may make on average (token bucket; over it: 429 with Retry-After); 0 turns the limit off."),
    Setting("serve_rate_burst", int, 200, "API: requests a key may make at once before serve_rate_limit applies."),
    Setting("serve_thumbnail_rate_limit", float, 1000.0, "API: thumbnail requests per second each key may make, a budget of their own (a scrolled grid fetches hundreds, which must not use up serve_rate_limit); 0 turns this limit off."),
    Setting("serve_thumbnail_rate_burst", int, 2000, "API: thumbnail requests a key may make at once before serve_thumbnail_rate_limit applies."),
    Setting("serve_cors_origins", str, "", "API: comma-separated origins allowed by CORS (e.g. https://shop.example); empty = CORS off."),
    Setting("serve_page_limit", int, 200, "API: the most items one page of a list may hold (the limit parameter is capped here)."),
    Setting("serve_upload_max_bytes", int, 8_000_000, "API: largest image upload accepted by search-by-image (413 above)."),
    Setting("serve_upload_max_pixels", int, 25_000_000, "API: most pixels an uploaded query image may have (422 above)."),
    Setting("serve_source_root", str, "", "API: ingest jobs read folders and manifests only inside this directory. Empty (the default): the API starts no ingest jobs (409, the hint names this setting)."),
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
        coerced = setting.type(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"setting {setting.name} from {origin}: {value!r} is not a valid {setting.type.__name__}",
            hint=f"{setting.summary} (docs/settings.md)",
        ) from exc
    low, high = setting.bounds
    if (low is not None and coerced < low) or (high is not None and coerced > high):
        span = f"{'no minimum' if low is None else f'at least {low:g}'} and " \
               f"{'no maximum' if high is None else f'at most {high:g}'}"
        raise UsageError(f"setting {setting.name} from {origin}: {value!r} is out of range ({span})",
                         hint=f"{setting.summary} (docs/settings.md)")
    return coerced


class Settings:
    """Resolved settings; attribute access (``settings.max_pixels``).

    Immutable by use (``replace`` makes new ones), equal and hashable by value, and pickled
    as their values: workers receive the driver's settings as they are, never re-resolved
    (no TOML or environment read again in a worker)."""

    def __init__(self, values: dict[str, Any]):
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_values":  # pickle's probes; unpickling before init
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Settings, (self._values,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

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
