"""SQLite schema of a store, as an ordered list of migrations.

``store.sqlite`` holds the mutable truth. Each migration runs once, in a transaction,
and bumps ``PRAGMA user_version``; a store newer than this code is refused.
Modules that own tables (collections, rules, arrangement versions, ...) append their
own migration to the end of MIGRATIONS; never edit a migration that has shipped.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: catalog, images, features and derived merchandising data
    """
    CREATE TABLE products (
        id TEXT PRIMARY KEY,
        image_path TEXT NOT NULL,          -- absolute path of the source image
        sha256 TEXT,                       -- content hash of the image bytes (NULL if unread)
        status TEXT NOT NULL,              -- ok | failed
        title TEXT, description TEXT, category TEXT, brand TEXT,
        price REAL, stock REAL, sales REAL, created_at TEXT,
        attributes TEXT NOT NULL DEFAULT '{}',   -- JSON of the manifest's other columns
        file_size INTEGER, file_mtime REAL,      -- stat of the image when it was hashed
        updated_run INTEGER
    );
    CREATE INDEX products_sha ON products(sha256);
    CREATE INDEX products_category ON products(category);
    CREATE TABLE images (
        sha256 TEXT PRIMARY KEY,
        width INTEGER NOT NULL, height INTEGER NOT NULL,
        bytes INTEGER NOT NULL, format TEXT
    );
    CREATE TABLE errors (
        product_id TEXT PRIMARY KEY,
        image_path TEXT NOT NULL,
        sha256 TEXT,
        reason TEXT NOT NULL,              -- stable code: empty-file, truncated, not-an-image, ...
        detail TEXT NOT NULL,
        run_id INTEGER
    );
    CREATE TABLE shards (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        backend TEXT NOT NULL,
        fingerprint TEXT NOT NULL,         -- JSON, see features.base.fingerprint_key
        spec_key TEXT NOT NULL,            -- backend name + options as asked for (plans skips)
        path TEXT NOT NULL UNIQUE,         -- relative to the store
        n INTEGER NOT NULL,
        run_id INTEGER
    );
    CREATE TABLE features (                -- which shard row holds an image's features
        backend TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        shard_id INTEGER NOT NULL REFERENCES shards(id),
        row INTEGER NOT NULL,
        PRIMARY KEY (backend, fingerprint, sha256)
    );
    CREATE TABLE colours (                 -- named colours per image, rank 0 = dominant
        sha256 TEXT NOT NULL, rank INTEGER NOT NULL,
        name TEXT NOT NULL, hex TEXT NOT NULL, weight REAL NOT NULL,
        PRIMARY KEY (sha256, rank)
    );
    CREATE TABLE quality (                 -- measured value of every quality metric per image
        sha256 TEXT NOT NULL, name TEXT NOT NULL,
        value REAL NOT NULL, flagged INTEGER NOT NULL,
        PRIMARY KEY (sha256, name)
    );
    CREATE TABLE audit (                   -- listed-vs-image disagreements per product
        product_id TEXT NOT NULL, kind TEXT NOT NULL,
        listed TEXT NOT NULL, observed TEXT NOT NULL, distance REAL NOT NULL,
        PRIMARY KEY (product_id, kind)
    );
    CREATE TABLE dup_groups (
        group_id INTEGER NOT NULL, product_id TEXT NOT NULL PRIMARY KEY,
        representative INTEGER NOT NULL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started_at TEXT NOT NULL, finished_at TEXT,
        source TEXT NOT NULL, settings TEXT NOT NULL, summary TEXT
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: collections, merchandising rules and arrangement versions (vismerch.merch)
    """
    CREATE TABLE collections (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL,                -- category | column | rule
        definition TEXT NOT NULL,          -- JSON: category, column + value, or where
        auto INTEGER NOT NULL DEFAULT 0,   -- 1 = made by refresh from the catalog
        created_at TEXT NOT NULL,
        refreshed_at TEXT
    );
    CREATE TABLE collection_members (
        collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
        product_id TEXT NOT NULL,
        PRIMARY KEY (collection, product_id)
    );
    CREATE INDEX collection_members_product ON collection_members(product_id);
    CREATE TABLE rules (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,                -- pin | boost | bury | hide | bury-out-of-stock
        scope TEXT,                        -- a collection name, NULL = every collection
        condition TEXT,                    -- expression (boost, bury, hide)
        product_id TEXT,                   -- pin
        position INTEGER,                  -- pin, 1-based
        factor REAL NOT NULL DEFAULT 0,    -- boost and bury, 0-100
        oos_policy TEXT NOT NULL DEFAULT 'release',  -- pin: release | substitute | keep
        enabled INTEGER NOT NULL DEFAULT 1,
        note TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TABLE rule_log (                -- out-of-stock pins released or substituted
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        rule_id INTEGER NOT NULL,
        collection TEXT NOT NULL,
        kind TEXT NOT NULL,                -- substitute | release
        product_id TEXT NOT NULL,
        substitute_id TEXT,
        position INTEGER,
        detail TEXT,
        created_at TEXT NOT NULL,
        reverted_at TEXT
    );
    CREATE TABLE arrangement_versions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        collection TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        params TEXT NOT NULL,              -- JSON of the arrangement options
        items TEXT NOT NULL,               -- JSON list of [product id, reason] by position
        summary TEXT,                      -- JSON: business score, breakpoints, conflicts
        UNIQUE (collection, name)
    );
    CREATE TABLE arrangement_publications (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        collection TEXT NOT NULL,
        version_id INTEGER NOT NULL REFERENCES arrangement_versions(id),
        action TEXT NOT NULL,              -- publish | rollback
        at TEXT NOT NULL
    );
    """,
    # 3: merchandiser labels for attribute tags (few-shot examples that override zero-shot)
    """
    CREATE TABLE tag_labels (
        product_id TEXT NOT NULL, attribute TEXT NOT NULL, label TEXT NOT NULL,
        PRIMARY KEY (product_id, attribute)
    );
    """,
    # 4: HTTP API keys (salted hashes only) and the audit log of every API write
    #    (vismerch.catalog.access)
    """
    CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,               -- public part of the key (vmk_<id>_<secret>)
        role TEXT NOT NULL,                -- viewer | merchandiser | publisher | admin | storefront
        name TEXT,
        salt BLOB NOT NULL,
        hash BLOB NOT NULL,                -- scrypt(secret, salt)
        created_at TEXT NOT NULL,
        expires_at TEXT,                   -- NULL = never
        revoked_at TEXT
    );
    CREATE TABLE audit_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        actor TEXT NOT NULL,               -- key id, or cli
        role TEXT,
        action TEXT NOT NULL,              -- e.g. POST /api/v1/rules
        target TEXT,
        status INTEGER,                    -- HTTP status of the write
        detail TEXT                        -- JSON
    );
    """,
    # 5: the service layer (vismerch.service): sub-collections, scheduled and scoped rules,
    #    review decisions that survive re-derive, ingest jobs, precomputed storefront grids
    """
    ALTER TABLE collections ADD COLUMN parent TEXT;   -- a sub-collection names its parent
    ALTER TABLE rules ADD COLUMN starts_at TEXT;      -- RFC 3339 UTC, NULL = always
    ALTER TABLE rules ADD COLUMN ends_at TEXT;        -- exclusive, NULL = never ends
    ALTER TABLE rules ADD COLUMN reach TEXT NOT NULL DEFAULT 'collection';  -- collection | subtree
    CREATE TABLE dup_reviews (             -- a merchandiser's decision on one pair (a < b)
        a TEXT NOT NULL, b TEXT NOT NULL,
        decision TEXT NOT NULL,            -- keep (duplicates, keep = the one shown) | distinct
        keep TEXT,
        by TEXT, at TEXT NOT NULL,
        PRIMARY KEY (a, b)
    );
    CREATE TABLE queue_reviews (           -- quality / audit queue items resolved or ignored
        queue TEXT NOT NULL,               -- quality | audit
        product_id TEXT NOT NULL,
        item TEXT NOT NULL,                -- the flag name or audit kind
        sha256 TEXT,                       -- the image judged: a new image reopens the item
        decision TEXT NOT NULL,            -- resolved | ignored
        note TEXT, by TEXT, at TEXT NOT NULL,
        PRIMARY KEY (queue, product_id, item)
    );
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,                -- ingest
        status TEXT NOT NULL,              -- queued | running | done | failed
        params TEXT NOT NULL,              -- JSON
        done INTEGER NOT NULL DEFAULT 0, total INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT,
        summary TEXT, error TEXT, by TEXT
    );
    CREATE TABLE published_grids (         -- the published order per collection, precomputed
        collection TEXT PRIMARY KEY,
        version_id INTEGER NOT NULL,
        version_name TEXT NOT NULL,
        etag TEXT NOT NULL,
        ids TEXT NOT NULL,                 -- JSON list of product ids by position
        thumbs TEXT NOT NULL,              -- JSON list: 1 when the product has a thumbnail
        published_at TEXT NOT NULL
    );
    """,
    # 6 (branch versions): editable drafts with optimistic concurrency. A version's ETag is
    # "v<id>-<revision>"; an edit bumps revision. Who saved and who last edited it.
    """
    ALTER TABLE arrangement_versions ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE arrangement_versions ADD COLUMN created_by TEXT;
    ALTER TABLE arrangement_versions ADD COLUMN updated_at TEXT;
    ALTER TABLE arrangement_versions ADD COLUMN updated_by TEXT;
    CREATE INDEX IF NOT EXISTS arrangement_publications_by_collection
        ON arrangement_publications (collection, id);
    """,
    # 7 (branch urls): validators of images downloaded from URLs, so a re-run sends
    # conditional requests and skips unchanged images on 304 without downloading them
    """
    CREATE TABLE remote_images (
        url TEXT PRIMARY KEY,
        sha256 TEXT NOT NULL,              -- content hash of the bytes last downloaded
        etag TEXT, last_modified TEXT,     -- as the server sent them (NULL if it did not)
        run_id INTEGER
    );
    """,
    # 8 (branch colour): multicolour is a verdict about the product, not a colour: it moves
    #    out of the colour list (where it was a rank-0 pseudo-colour with weight 1.0 and an
    #    empty hex) into its own table; the remaining colours move up one rank
    """
    CREATE TABLE multicolour (sha256 TEXT PRIMARY KEY);   -- images judged multicolour
    INSERT OR IGNORE INTO multicolour (sha256)
        SELECT sha256 FROM colours WHERE name = 'multicolour' AND hex = '';
    DELETE FROM colours WHERE name = 'multicolour' AND hex = '';
    -- two steps so no intermediate rank collides with one not yet moved
    UPDATE colours SET rank = -rank WHERE sha256 IN (SELECT sha256 FROM multicolour);
    UPDATE colours SET rank = -rank - 1 WHERE sha256 IN (SELECT sha256 FROM multicolour);
    """,
    # 9: thumbnails packed one file per ingest task (catalog/thumbs.py); images without a
    #    row keep their thumbs/<sha256>.jpg|.webp file from before
    """
    CREATE TABLE thumbs (
        sha256 TEXT PRIMARY KEY,
        pack TEXT NOT NULL,                -- thumbs/packs/<name>.pack, relative to the store
        start INTEGER NOT NULL, length INTEGER NOT NULL,   -- byte range in the pack
        format TEXT NOT NULL               -- jpeg | webp
    );
    CREATE INDEX thumbs_pack ON thumbs(pack);
    """,
    # 10: A/B experiments of a collection's versions (catalog/experiments_store.py); at most
    #     one running per collection
    """
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        collection TEXT NOT NULL,
        name TEXT NOT NULL,
        variants TEXT NOT NULL,            -- JSON [{name, version, version_id, weight}], control first
        holdout REAL NOT NULL DEFAULT 0,   -- share of visitors kept on the live version, not counted
        metric TEXT NOT NULL,
        guardrails TEXT NOT NULL DEFAULT '[]',
        min_lift REAL NOT NULL,
        plan TEXT,                         -- JSON: sample size and duration planned at creation
        status TEXT NOT NULL,              -- running | stopped | promoted
        starts_at TEXT NOT NULL, ends_at TEXT,
        created_at TEXT NOT NULL, created_by TEXT,
        ended_at TEXT, ended_by TEXT, winner TEXT
    );
    CREATE UNIQUE INDEX experiments_one_running ON experiments(collection) WHERE status = 'running';
    """,
    # 11 (branch i28-query): search-query merchandising (merch/queryrules.py): rules for a
    #     query or query pattern, and synonyms; patterns and terms are stored normalised
    """
    CREATE TABLE query_rules (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,                -- pin | hide | boost | bury | redirect
        query TEXT NOT NULL,               -- the pattern, normalised
        match TEXT NOT NULL,               -- exact | prefix | contains | glob
        products TEXT NOT NULL DEFAULT '[]',  -- JSON list of product ids
        position INTEGER, factor REAL,
        collection TEXT,                   -- redirect target
        enabled INTEGER NOT NULL DEFAULT 1,
        note TEXT, starts_at TEXT, ends_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE TABLE synonyms (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,                -- equivalent | one-way
        term TEXT,                         -- one-way: the term that expands
        synonyms TEXT NOT NULL,            -- JSON list of terms, normalised
        enabled INTEGER NOT NULL DEFAULT 1,
        note TEXT,
        created_at TEXT NOT NULL
    );
    """,
    # 12: one vocabulary for a rule from SQL row to API model (collection, where, product)
    """
    ALTER TABLE rules RENAME COLUMN scope TO collection;
    ALTER TABLE rules RENAME COLUMN condition TO "where";
    ALTER TABLE rules RENAME COLUMN product_id TO product;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
