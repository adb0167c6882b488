// The dashboard's errors: `BodyTooLargeError`, an action body too large to
// read, which handler.ts answers with a 413.

/** An action body over the dashboard's limit (handler.ts, MAX_BODY): answered 413. @internal */
export class BodyTooLargeError extends Error {}
