/** Pipeline stage worker. */
export { startStage, type StageWorkerOptions, type RunningStage } from "./worker.js";
