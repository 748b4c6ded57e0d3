/**
 * The name the control machine goes by: the coordinator's default node in definitions, and its node
 * in ledgers and status files. No registry node may take it.
 */
export const controlNodeName = "local";
