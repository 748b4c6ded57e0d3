/**
 * src/cluster: what one cluster definition means to the step folders, in one place that the
 * daemon and every command share, so `shardctl plan/stage/diff` and the daemon cannot diverge:
 * its nodes, the probes and plan, the staging, the launch request and its launch identity.
 */
export { controlNodeName, controlNodeConfig, nodeConfigOf, nodeConfigNamed, nodesOfCluster, createNodePool, sshOptionsOf, type ClusterNodes } from "./cluster-nodes.js";
export { probeClusterNodes, engineVersionDeadlineMs, type ProbeClusterOptions } from "./probe-cluster-nodes.js";
export { planForCluster, describeBudgets, type PlannedCluster, type PlanForClusterOptions } from "./plan-for-cluster.js";
export { daemonPlanOptions, type DaemonPlanChoices } from "./daemon-plan-options.js";
export { stagingSourceOf } from "./staging-source.js";
export { stageForCluster, stagingFailureOf, type StagedCluster } from "./stage-for-cluster.js";
export { bindHostOf, buildLaunchRequest, httpBindHostOf, launchAddressesOf, routerBackendNameOf, runDirOf, type LaunchAddresses } from "./launch-request.js";
export { launchIdentity } from "./launch-identity.js";
