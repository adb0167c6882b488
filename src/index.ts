/**
 * `import { Scheduler } from 'taskheap'`: the scheduler, its tasks and jobs,
 * calendar rules, errors, and the types of the durable layer that users
 * read and pass (a store's own contract is `taskheap/store`).
 * @module
 */
export { Scheduler } from './scheduler.js';
export type { CronOptions, SchedulerOptions, SchedulerEvents, WaitOptions, WaitingFilter } from './scheduler-options.js';
export type { ErrorInfo, SchedulerStats } from './core/loop-types.js';
export type { TaskOptions } from './core/task-options.js';
export type { RateLimit, GroupRateLimit, ConcurrencyLimit, FairShare, DedupeMode, DedupeOutcome } from './core/limit-options.js';
export { Queue } from './core/queues.js';
export type { QueueOptions, QueueCounts, QueueInfo } from './core/queues.js';
export type { SchedulerQueue, SchedulerQueueCounts, SchedulerQueueInfo } from './scheduler-queues.js';
export { Task } from './core/task.js';
export type { TaskState, TaskContext, TaskFunction, TaskJob } from './core/task.js';
export type { TaskLogLine } from './core/journal.js';
export { MAX_LOG_LINES, MAX_LOG_LINE, MAX_PROGRESS_JSON } from './core/journal.js';
export type { Clock } from './core/clock.js';
export { systemClock } from './core/clock.js';
export type { RetryOptions } from './core/retry.js';
export type { Lateness } from './core/lateness.js';
export type { DateTimeLike, IsoInstant, When } from './core/validate.js';
export { parseDuration } from './core/duration.js';
export type { Duration } from './core/duration.js';
export { MAX_TIME } from './core/validate.js';
export {
  TaskheapError,
  ClosedError,
  QueueFullError,
  TimeoutError,
  CancelledError,
  MissingPeerError,
  StepSuspended,
} from './core/errors.js';
export type { TaskheapErrorCode } from './core/errors.js';
export type { SleepFor } from './core/steps.js';
export { Job, MAX_NEXT_RUNS } from './jobs/job.js';
export { DEFAULT_CATCH_UP } from './rules/plan.js';
export type { JobState, SkipInfo } from './jobs/job.js';
export type { DedupeOptions, JobPolicyOptions, LimitOptions, MisfirePolicy, OverlapPolicy, RunOptions } from './core/options.js';
export { Every, CronBuilder, AtBuilder, JobBuilder } from './jobs/builders.js';
export type { JobOptions, ModuleJobOptions } from './jobs/builders.js';
export { CronRule } from './rules/cron.js';
export { CalendarRule } from './rules/calendar.js';
export type { CalendarRuleOptions } from './rules/calendar.js';
export { IntervalRule } from './rules/rule.js';
export type { Rule } from './rules/rule.js';
export {
  FlowError,
  JobKeyError,
  LeaseExpiredError,
  LeaseLostError,
  SchemaVersionError,
  TaskNotFoundError,
  UnknownHandlerError,
  WaitTimeoutError,
} from './durable/errors.js';
export type {
  StoredTask,
  StoredStep,
  EnqueuedTask,
  StoredJob,
  StoredState,
  TaskFilter,
  TaskCountFilter,
  AttemptError,
  JobFilter,
} from './durable/store.js';
export type {
  Handler,
  DurableTaskOptions,
  DurableTaskItem,
  DurableContext,
  StoredJobOptions,
  TransactionClient,
} from './durable/options.js';
export type { DurableQueue, DurableQueueInfo, DurableQueueOptions, DurableQueueCounts } from './durable/queues.js';
export type { DefineOptions } from './durable/handlers.js';
export { Flows } from './scheduler-flows.js';
export type { Dependency, DependencyRule, FlowContext, FlowFunction, FlowSpec, FlowTask } from './durable/flow-graph.js';
export type { OnFailure, DependencyInfo } from './durable/store.js';
export type { StoredFlow, FlowStatus, FlowTaskStatus, FlowDependencyStatus } from './durable/flows.js';
export type { TaskLinks, TaskLink } from './durable/store.js';
export { ThreadError } from './threads/errors.js';
export type { ThreadOptions, ThreadTaskOptions, ThreadContext } from './threads/options.js';
