import { startFixtureSite } from '@mocra/testkit';
import { defineSpider, Mocra } from 'mocra';

interface Book {
  title: string;
  price: string;
  rating: number;
  inStock: boolean;
  category: string;
  url: string;
}

// An offline book shop (from mocra's test kit), so this runs without the internet.
const site = await startFixtureSite({ catalog: { books: 40 } });

const books = defineSpider<Book>({
  name: 'books',
  startUrls: [`${site.url}/books/page/1`],
  parse(res, cx) {
    const $ = res.$;
    // Listing pages: follow every book and the next page.
    $('article.product_pod h3 a, li.next a').each((_, a) => {
      cx.follow($(a).attr('href')!);
    });
    // Book pages: emit the book.
    const book = $('article.product');
    if (book.length > 0) {
      cx.emit({
        title: book.find('h1').text(),
        price: book.find('.price').text(),
        rating: Number(book.find('.star-rating').attr('data-rating')),
        inStock: book.find('.availability').hasClass('instock'),
        category: book.find('.category a').text(),
        url: res.url,
      });
    }
  },
});

const summary = await Mocra.builder()
  .spider(books, (book) => console.log(`${book.title} — ${book.price}`))
  .run();

console.log(`${summary.items} books from ${summary.pages} pages in ${summary.durationMs} ms`);
await site.close();
