// The work of bench/threads.ts as a Bree job (plain JavaScript, run in a
// fresh worker thread per run, as Bree runs every job): the payload comes in
// `workerData.work`, the result goes back as a message, then 'done'.
import { parentPort, workerData } from 'node:worker_threads';
import { pool } from './threads-work.js';

parentPort.postMessage({ result: pool(workerData.work) });
parentPort.postMessage('done');
