// The demo dataset: one JSON file per knowledge network in ../data/, read with the
// lossless parser so identifiers above 2^53 and number spellings stay exact.
//
// File shape: {knowledge_network, concept_groups, object_types, relation_types,
// action_types, metrics, capabilities, action_executions, instances: {<ot_id>: [row, ...]}}.
// Simulator-only keys, never sent to clients: `access` on an object type (who may
// query it, masked fields, row filter), `condition` on an action type (the targets it
// scans when called without instances) and `result` (the template of a per-object result:
// "{{param}}" is replaced by the resolved parameter), and on a seeded execution `targets`
// (instance identities), `fail` (indexes of the targets that failed) and `generate` (a count of
// per-object results produced on read instead of stored).

import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from './json.mjs';

const DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'data');

export function loadDataset(dir = DATA_DIR) {
  const networks = new Map();
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  for (const f of files) {
    const doc = parse(readFileSync(join(dir, f), 'utf8'));
    const kn = doc.knowledge_network;
    if (!kn || typeof kn.id !== 'string') throw new Error(`${f}: missing knowledge_network.id`);
    const objectTypes = new Map();
    for (const ot of doc.object_types || []) {
      objectTypes.set(ot.id, { def: ot, rows: (doc.instances || {})[ot.id] || [] });
    }
    networks.set(kn.id, {
      kn,
      conceptGroups: doc.concept_groups || [],
      objectTypes,
      relationTypes: doc.relation_types || [],
      actionTypes: doc.action_types || [],
      metrics: doc.metrics || [],
      capabilities: doc.capabilities || [],
      actionExecutions: doc.action_executions || [],
    });
  }
  return {
    networks,
    /** KN summary objects in file order. */
    listNetworks() {
      return [...networks.values()].map((n) => n.kn);
    },
    network(id) {
      return networks.get(id) || null;
    },
    objectType(knId, otId) {
      const n = networks.get(knId);
      return (n && n.objectTypes.get(otId)) || null;
    },
  };
}

/** An action type definition as the services return it (simulator keys removed). */
export function publicActionType(def) {
  const out = {};
  for (const [k, v] of Object.entries(def)) if (k !== 'condition' && k !== 'result') out[k] = v;
  return out;
}

/** An object type definition as bkn-backend returns it (simulator keys removed). */
export function publicObjectType(def, { exportView = false } = {}) {
  const out = {};
  for (const [k, v] of Object.entries(def)) {
    if (k === 'access' || k === 'display_key') continue;
    out[k] = v;
  }
  if (exportView && Array.isArray(out.data_properties)) {
    // The export view carries no condition_operations.
    out.data_properties = out.data_properties.map((p) => {
      const q = { ...p };
      delete q.condition_operations;
      return q;
    });
  }
  return out;
}
