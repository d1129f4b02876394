/**
 * The reindex job's stores and keys: the source table it reads, the search-index table it writes, and where its
 * runs' lease and fences live. The lease and the fences use FencedJob's layout (lock item and job row
 * `reindex#<date>`, chunk fence items `reindex#<date>#chunk#NN` beside the row, docs/DESIGN.md § Chunk fences), so a
 * night run by the worker process and a night run by the state machine are the same night in the same tables.
 */
import { JOB_TABLE, LOCK_TABLE, jobKeys, type TableDescription } from '../../lib/core/internal';

/** The job's name: its runs' keys are `reindex#<date>`. */
export const JOB_NAME = 'reindex';

/** The keys of the job's runs (lock item, job row), as FencedJob derives them from the name. */
export const runKeys = jobKeys(JOB_NAME);

/** A chunk's own fence item, beside the run's job row: the item every update of that chunk is checked against. */
export function chunkFenceKey(date: string, chunk: number): string {
  return runKeys.chunkFence(date, chunk);
}

/** Product keys are `prod#00042`: five digits, so a night holds at most this many products. */
export const MAX_ITEMS = 100_000;

/** The key of the product at `index` in the source table (and of its entry in the index table). */
export function productKey(index: number): string {
  return `prod#${String(index).padStart(5, '0')}`;
}

/** The products to index: one item per product, `name` and `price`. Written by its owners, only read here. */
export const SOURCE_TABLE: TableDescription = {
  suffix: 'source',
  partitionKey: { name: 'pk', type: 'S' },
  purpose: 'products to index: name and price, one item per product; the reindex job only reads it.',
};

/** The search index: one entry per product, rewritten every night by a fenced update. */
export const INDEX_TABLE: TableDescription = {
  suffix: 'index',
  partitionKey: { name: 'pk', type: 'S' },
  purpose: 'one entry per product: its search terms, the night, and the fencing token of the holder that wrote it.',
};

/** Every table the job uses, in the order they are created: the library's two, then its own two. */
export const REINDEX_TABLES = [LOCK_TABLE, JOB_TABLE, SOURCE_TABLE, INDEX_TABLE] as const;

/** The names of the job's tables (a record of names, as a local run takes them: lib/local/workflow.ts). */
export type ReindexTables = {
  /** Lock items (the lease): never TTL'd, never deleted. */
  readonly locks: string;
  /** Job rows and chunk fence items. */
  readonly jobs: string;
  readonly source: string;
  readonly index: string;
};

/** The table names for a prefix: `<prefix>locks`, `<prefix>jobs`, `<prefix>source`, `<prefix>index`. */
export function reindexTables(prefix: string): ReindexTables {
  return {
    locks: prefix + LOCK_TABLE.suffix,
    jobs: prefix + JOB_TABLE.suffix,
    source: prefix + SOURCE_TABLE.suffix,
    index: prefix + INDEX_TABLE.suffix,
  };
}

/**
 * The chunk function's own environment, beside the one FencedJob gives it (tables, lease settings, chunk count):
 * the tables it reads and writes, and the night's size.
 */
export const ReindexEnv = {
  sourceTable: 'REINDEX_SOURCE_TABLE',
  indexTable: 'REINDEX_INDEX_TABLE',
  items: 'REINDEX_ITEMS',
  chunkSize: 'REINDEX_CHUNK_SIZE',
} as const;
