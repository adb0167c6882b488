// Optional peer dependencies (database drivers, OpenTelemetry): loaded only
// when used, with a clear error when one is missing.
import { MissingPeerError } from './errors.js';

/**
 * Imports an optional peer dependency on first use. A missing package becomes
 * a `MissingPeerError` naming it and the install command; any other failure
 * (a broken install, an error thrown while it loads) is passed on as it is.
 */
export async function loadPeer<T>(name: string, feature: string): Promise<T> {
  try {
    return (await import(name)) as T;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String((error as Error).message).includes(name)) {
      throw new MissingPeerError(name, feature, { cause: error });
    }
    throw error;
  }
}
