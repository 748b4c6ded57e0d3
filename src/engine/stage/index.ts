/** Pipeline stage worker. */
export { startStage, type StageOptions, type RunningStage } from "./worker.js";
