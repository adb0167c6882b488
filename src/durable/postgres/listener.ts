// The PostgreSQL store's listening connection: one client of its own that
// LISTENs for new work (WAKE), cancellations (CANCEL), paused queues
// (QUEUES) and, once someone waits for a task, final states (DONE); reads
// the payloads of its own schema only; and reconnects with backoff when the
// connection drops, telling the store to look again for whatever was
// announced meanwhile. Behind PgBouncer without a direct connection to
// listen on it does not listen at all: the store then learns of others'
// work by polling. The channels are named here, for the statements that
// NOTIFY on them.
import { bounded, type Connection } from './connection.js';
import type { PgClient, PgNotification } from './pg.js';

/** The channels every store listens on; payloads are `<ms>` / `<id>`, or `<schema>:<ms>` with a schema. */
export const WAKE = 'taskheap_wake';
export const CANCEL = 'taskheap_cancel';

/**
 * Tasks reached a final state (payload `<id>` or `<id>,<id>,...`); only
 * processes waiting for a task (`waitFor`) listen.
 */
export const DONE = 'taskheap_done';

/**
 * Ids in one DONE notification at most: 300 ids of up to 19 digits and a
 * schema prefix stay under the 8,000 bytes a payload may hold.
 */
export const DONE_IDS = 300;

/**
 * A queue was paused (payload \`<name>\`, or \`<schema>:<name>\`): processes
 * hand back the tasks of that queue they claimed but have not started.
 */
export const QUEUES = 'taskheap_queue';

/** The listener's statements: what every store listens on, and final states once someone waits. */
const LISTEN_SQL = {
  listen: `LISTEN ${WAKE}; LISTEN ${CANCEL}; LISTEN ${QUEUES}`,
  listenDone: `LISTEN ${DONE}`,
} as const;

const LISTENER_NAME = 'taskheap-listener';
const RECONNECT_MIN = 100;
const RECONNECT_MAX = 5_000;

function noop(): void {}

export class Listener {
  readonly #connection: Connection;
  /** Prefix of NOTIFY payloads, so stores in other schemas of the same database ignore ours. */
  readonly #prefix: string;
  readonly #timeout: number;
  #closed = false;
  #listener: PgClient | undefined = undefined;
  #reconnectTimer: NodeJS.Timeout | undefined = undefined;
  #backoff = RECONNECT_MIN;
  #onWake: ((runAt: number) => void) | undefined = undefined;
  #onCancel: ((id: number) => void) | undefined = undefined;
  /** Told of a queue paused anywhere (its name). */
  #onPause: ((queue: string) => void) | undefined = undefined;
  /** Set by watch(): told of tasks reaching a final state anywhere (null: notifications may have been lost). */
  #onDone: ((id: number | null) => void) | undefined = undefined;

  constructor(connection: Connection, prefix: string, timeout: number) {
    this.#connection = connection;
    this.#prefix = prefix;
    this.#timeout = timeout;
  }

  /** The store opens again (after a close()): listening may start again. */
  reopen(): void {
    this.#closed = false;
  }

  async subscribe(onWake: (runAt: number) => void, onCancel: (id: number) => void, onPause?: (queue: string) => void): Promise<void> {
    this.#onWake = onWake;
    this.#onCancel = onCancel;
    this.#onPause = onPause;
    if (!this.#connection.canListen) return;
    if (this.#listener === undefined && this.#reconnectTimer === undefined) await this.#listen();
  }

  /** Whether the listening connection is up: announcements reach this process (Store.listening). */
  get listening(): boolean {
    return this.#listener !== undefined;
  }

  /**
   * Listens for final states too (DONE), connecting the listener if need be;
   * resolves with whether it can listen at all (not behind PgBouncer without
   * a direct connection): whether final states elsewhere reach `onDone`.
   */
  async watch(onDone: (id: number | null) => void): Promise<boolean> {
    const first = this.#onDone === undefined;
    this.#onDone = onDone;
    if (!this.#connection.canListen) return false;
    if (this.#listener !== undefined) {
      if (first) await this.#listener.query(LISTEN_SQL.listenDone);
    } else if (this.#reconnectTimer === undefined) {
      await this.#listen();
    }
    return true;
  }

  /** Connects the listening client; rejects if it cannot. Once connected, a drop reconnects with backoff. */
  async #listen(): Promise<void> {
    const pg = await this.#connection.load();
    const client = new pg.Client(this.#connection.clientConfig(LISTENER_NAME));
    let live = false;
    const dropped = () => {
      if (!live) return;
      live = false;
      if (this.#listener === client) this.#listener = undefined;
      client.end().catch(noop);
      this.#scheduleReconnect();
      // Until it is back nothing announces new work here: the claimer looks now, and every poll meanwhile.
      if (!this.#closed) this.#onWake?.(Date.now());
    };
    client.on('error', dropped);
    client.on('end', dropped);
    client.on('notification', this.#notified);
    try {
      await client.connect();
      await client.query(LISTEN_SQL.listen);
      if (this.#onDone !== undefined) await client.query(LISTEN_SQL.listenDone);
    } catch (error) {
      await client.end().catch(noop);
      throw error;
    }
    if (this.#closed) {
      await client.end().catch(noop);
      return;
    }
    live = true;
    this.#listener = client;
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer !== undefined) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(this.#backoff * 2, RECONNECT_MAX);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (this.#closed) return;
      this.#listen().then(
        () => {
          if (this.#closed) return;
          this.#backoff = RECONNECT_MIN;
          // Whatever was announced while we were away is lost: look again now.
          this.#onWake?.(Date.now());
          this.#onDone?.(null);
        },
        () => this.#scheduleReconnect(),
      );
    }, delay);
    this.#reconnectTimer.unref();
  }

  /**
   * The schema the tables are in, for the flows trigger's payloads
   * (\`<schema>:<ms>\`, see migrations.ts, version 6): a store without a \`schema\`
   * option (payload prefix '') accepts them too.
   */
  ownSchema(schema: string): void {
    this.#own = `${schema}:`;
  }

  #own: string | undefined = undefined;

  #notified = (message: PgNotification): void => {
    let payload = message.payload ?? '';
    if (this.#prefix === '' && this.#own !== undefined && payload.startsWith(this.#own)) payload = payload.slice(this.#own.length);
    if (!payload.startsWith(this.#prefix)) return;
    const rest = payload.slice(this.#prefix.length);
    if (message.channel === QUEUES) {
      if (rest !== '') this.#onPause?.(rest);
      return;
    }
    // A settle announces its batch's final states in one notification: "<id>,<id>,...".
    if (message.channel === DONE && /^\d+(,\d+)+$/.test(rest)) {
      for (const id of rest.split(',')) this.#onDone?.(Number(id));
      return;
    }
    if (!/^-?\d+$/.test(rest)) return; // another schema's payload ("<schema>:<n>") when we use the default
    const value = Number(rest);
    if (message.channel === WAKE) this.#onWake?.(value);
    else if (message.channel === CANCEL) this.#onCancel?.(value);
    else if (message.channel === DONE) this.#onDone?.(value);
  };

  /** Stops listening and reconnecting; a server that never answers is cut off after `timeout`. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#reconnectTimer !== undefined) clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    this.#backoff = RECONNECT_MIN;
    const listener = this.#listener;
    this.#listener = undefined;
    if (listener !== undefined) await bounded(listener.end().catch(noop), [listener], this.#timeout);
  }
}
