/** Model staging: put the files each node's stage needs into its HF cache, verified. */
export type {
  Manifest,
  ManifestFile,
  StagingSource,
  FileState,
  NodeState,
  FileCheck,
  NodeClassification,
  StagingProgress,
  StagingOptions,
  NodeStagingResult,
} from "./types.js";
export { fetchHubManifest, hashLocalManifest, maxListingBytes, selectFiles, gitBlobSha1, type HubManifestOptions } from "./manifest.js";
export { classifyNode, type Layout, type ClassifyOptions } from "./classify.js";
export { stageNode, resolveHome } from "./stage-node.js";
export { stageCluster, resolveManifest, type NodeStagingRequest, type NodeStagingFailure, type ClusterStagingResult } from "./stage-cluster.js";
export { transferFile, type TransferRequest } from "./transfer.js";
export { stageFileList, maxModelMetadataFiles } from "./stage-files.js";
export { isModelMetadataFile } from "./metadata-files.js";
export { assertSafePath } from "./safe-path.js";
export { repoFolder, blobPath, snapshotDir, snapshotPath, refPath, incompletePath } from "./cache-layout.js";
export { settleLockReleases } from "./node-lock.js";
