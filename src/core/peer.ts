// Optional peer dependencies (database drivers, OpenTelemetry): loaded only
// when used, with a clear error when one is missing.
import { TaskheapError } from './errors.js';

/**
 * Thrown at the first call that needs an optional peer dependency (a
 * database driver, `@opentelemetry/api`) that is not installed.
 */
export class MissingPeerError extends TaskheapError {
  /** The package to install. */
  readonly package: string;

  constructor(name: string, feature: string, options?: ErrorOptions) {
    super(
      `${feature} needs the optional peer dependency "${name}", which is not installed: npm install ${name}`,
      'ERR_MISSING_PEER',
      options,
    );
    this.package = name;
  }
}

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
