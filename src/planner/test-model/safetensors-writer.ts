import { writeFile } from "node:fs/promises";

/** One tensor to write: its name, safetensors dtype name, shape and raw little-endian bytes. */
export interface TensorData {
  name: string;
  dtype: string;
  shape: number[];
  data: Buffer;
}

/**
 * Write tensors as one safetensors file: u64 LE header length, the JSON header (padded with
 * spaces to a multiple of 8 bytes, as the reference implementation does), then the data buffer
 * with the tensors laid out in the given order.
 */
export async function writeSafetensors(file: string, tensors: readonly TensorData[], metadata: Record<string, string> = { format: "mlx" }): Promise<number> {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const tensor of tensors) {
    header[tensor.name] = { dtype: tensor.dtype, shape: tensor.shape, data_offsets: [offset, offset + tensor.data.length] };
    offset += tensor.data.length;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const headerBytes = Buffer.from(json, "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(headerBytes.length));
  await writeFile(file, Buffer.concat([prefix, headerBytes, ...tensors.map((t) => t.data)]));
  return offset;
}
