import { describe, expect, test } from 'vitest';
import { formatKeyPath, TomlKeyLocator } from './locate.js';

const at = (locator: TomlKeyLocator, ...path: (string | number)[]) => locator.find(path);

describe('formatKeyPath', () => {
  test('dots for bare keys, brackets for indexes and keys that need quoting', () => {
    expect(formatKeyPath(['crawler', 'task_concurrency'])).toBe('crawler.task_concurrency');
    expect(formatKeyPath(['tasks', 1, 'account'])).toBe('tasks[1].account');
    expect(formatKeyPath(['modules', 'my module', 'x'])).toBe('modules["my module"].x');
  });
});

describe('TomlKeyLocator', () => {
  test('finds keys under table headers, dotted keys and nested tables', () => {
    const text = [
      'name = "x"', // 1
      '', // 2
      '[crawler]', // 3
      '  task_concurrency = 8 # comment = [x]', // 4
      'download.headers.accept = "a"', // 5
      '[modules.catalog]', // 6
      'downloader = "http"', // 7
    ].join('\n');
    const loc = new TomlKeyLocator(text);
    expect(at(loc, 'name')).toEqual({ line: 1, column: 1 });
    expect(at(loc, 'crawler')).toEqual({ line: 3, column: 2 });
    expect(at(loc, 'crawler', 'task_concurrency')).toEqual({ line: 4, column: 3 });
    expect(at(loc, 'crawler', 'download', 'headers', 'accept')).toEqual({ line: 5, column: 18 });
    expect(at(loc, 'modules', 'catalog')).toEqual({ line: 6, column: 10 });
    expect(at(loc, 'modules', 'catalog', 'downloader')).toEqual({ line: 7, column: 1 });
  });

  test('arrays of tables get indexes; sub-tables attach to the latest element', () => {
    const text = [
      '[[tasks]]',
      'account = "a"',
      '[[tasks]]',
      'account = "b"',
      '[tasks.params]',
      'page = 2',
    ].join('\n');
    const loc = new TomlKeyLocator(text);
    expect(at(loc, 'tasks', 0, 'account')).toEqual({ line: 2, column: 1 });
    expect(at(loc, 'tasks', 1)).toEqual({ line: 3, column: 3 });
    expect(at(loc, 'tasks', 1, 'account')).toEqual({ line: 4, column: 1 });
    expect(at(loc, 'tasks', 1, 'params', 'page')).toEqual({ line: 6, column: 1 });
  });

  test('inline tables and arrays, elements by index, across lines', () => {
    const text = [
      'x = { a = 1, b = { c = "}" } }',
      'list = [',
      '  401,',
      '  "four]", # c',
      '  { k = 1 },',
      ']',
    ].join('\n');
    const loc = new TomlKeyLocator(text);
    expect(at(loc, 'x', 'a')).toEqual({ line: 1, column: 7 });
    expect(at(loc, 'x', 'b', 'c')).toEqual({ line: 1, column: 20 });
    expect(at(loc, 'list', 0)).toEqual({ line: 3, column: 3 });
    expect(at(loc, 'list', 1)).toEqual({ line: 4, column: 3 });
    expect(at(loc, 'list', 2, 'k')).toEqual({ line: 5, column: 5 });
  });

  test('strings of every kind never confuse it', () => {
    const text = [
      'a = """',
      '[not_a_table]',
      'b = 1"""',
      "c = '''x = [ '''",
      'd = "esc \\" [x] = "',
      "e = 'lit [y]'",
      '"quoted key" = 1',
      "'lit.key' = 2",
      'f = 1979-05-27 07:32:00Z',
      'g = 3',
    ].join('\n');
    const loc = new TomlKeyLocator(text);
    expect(loc.paths()).toEqual(['a', 'c', 'd', 'e', '["quoted key"]', '["lit.key"]', 'f', 'g']);
    expect(at(loc, 'g')).toEqual({ line: 10, column: 1 });
    expect(at(loc, 'quoted key')).toEqual({ line: 7, column: 1 });
  });

  test('an unknown path falls back to its closest written ancestor', () => {
    const loc = new TomlKeyLocator('[crawler]\nx = 1\n');
    expect(at(loc, 'crawler', 'missing')).toEqual({ line: 1, column: 2 });
    expect(at(loc, 'nowhere')).toBeUndefined();
  });
});
