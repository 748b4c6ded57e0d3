/** Watching the nodes a pass could not reach, so the next pass comes the moment one answers. */
export { ReturningNodes, type NodeWatch, type ReturningNodesOptions } from "./watch.js";
export { whatToWatch, type PassLeftBehind } from "./what-to-watch.js";
