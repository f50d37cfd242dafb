/**
 * Graph shapes for the DAG overhead benchmark, shared by bench/dag-overhead.ts. Each shape is
 * built once as bare `{ id, after }` records; both runners execute the same graph.
 */
export interface ShapeNode {
  readonly id: string;
  readonly after: readonly string[];
}

export interface Shape {
  readonly name: string;
  readonly description: string;
  readonly nodes: readonly ShapeNode[];
}

const id = (i: number) => `n${i}`;

/** One root, `n - 2` independent nodes after it, one sink after all of them. */
export function wide(n: number): Shape {
  const nodes: ShapeNode[] = [{ id: id(0), after: [] }];
  const middle: string[] = [];
  for (let i = 1; i < n - 1; i++) {
    nodes.push({ id: id(i), after: [id(0)] });
    middle.push(id(i));
  }
  nodes.push({ id: id(n - 1), after: middle });
  return { name: 'wide', description: `1 → ${n - 2} → 1 (fan-out, fan-in)`, nodes };
}

/** A chain of `n` nodes. */
export function deep(n: number): Shape {
  const nodes: ShapeNode[] = [];
  for (let i = 0; i < n; i++) nodes.push({ id: id(i), after: i === 0 ? [] : [id(i - 1)] });
  return { name: 'deep', description: `chain of ${n}`, nodes };
}

/** `n / width` layers of `width` nodes; each node runs after two nodes of the layer before. */
export function layered(n: number, width: number): Shape {
  const nodes: ShapeNode[] = [];
  const layers = Math.floor(n / width);
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const i = l * width + w;
      const after = l === 0 ? [] : [id((l - 1) * width + w), id((l - 1) * width + ((w + 1) % width))];
      nodes.push({ id: id(i), after });
    }
  }
  return { name: 'layered', description: `${layers} layers × ${width}, 2 edges per node`, nodes };
}
