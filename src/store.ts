/**
 * `import type { Store } from 'taskheap/store'`: the contract a durable
 * store implements (the store SPI) and the shapes it exchanges with the
 * scheduler, for those who write a store of their own or test against one.
 * **Not yet stable**: it may change in any minor release before 1.0. The
 * stores taskheap ships (`taskheap/sqlite`, `taskheap/postgres`) implement
 * it; what users of a store read and pass (`StoredTask`, `TaskFilter`, ...)
 * comes from `taskheap`.
 * @module
 */
export type {
  Store,
  StoreCapabilities,
  NewTask,
  NewJob,
  ClaimedTask,
  ClaimLimits,
  ClaimParams,
  RenewParams,
  NextDueParams,
  WarmParams,
  EndedTasks,
  DueJob,
  JobAdvance,
  Outcome,
  FinalState,
  QueryClient,
  QueueChange,
  QueueRate,
  QueueRooms,
  StoredQueue,
  FlowStore,
  LimitListStore,
  LimitGroup,
  NewFlow,
  NewEdge,
  EdgeEnd,
  StoredEdge,
  StoredFlowGraph,
  Dedupe,
} from './durable/store.js';
